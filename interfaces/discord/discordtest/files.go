package discordtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // attachment width and height
	_ "image/jpeg"
	_ "image/png"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// attachmentsPath is where the fake serves attachments, as
// cdn.discordapp.com does: /attachments/{channel}/{attachment}/{filename}.
const attachmentsPath = "/attachments/"

// maxUpload is Discord's default limit on the files of one message.
const maxUpload = 10 << 20

// File is a file uploaded with a message (multipart files[n]).
type File struct {
	Name        string // the attachment's filename
	ContentType string // the part's Content-Type
	Data        []byte
}

// attachment is a file the fake serves.
type attachment struct {
	id, channel string
	file        File
	sig         string // the hm of its signed URL
}

// AddAttachment stores a file as if a user had attached it to a message and
// returns the attachment object MESSAGE_CREATE carries in "attachments":
// id, filename, content_type, size, url and proxy_url (with width and
// height for an image). Both URLs point at the fake (give the client
// CDNURL: s.URL), signed as Discord's CDN URLs are (ex, is, hm): the fake
// serves the bytes to a GET of the URL as given, without any
// Authorization, and answers 404 to an unsigned or altered one.
func (s *Server) AddAttachment(name, contentType string, data []byte) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addAttachment(s.ID(), File{Name: name, ContentType: contentType, Data: data})
}

// addAttachment stores f as an attachment in channel and returns its
// object. The caller holds s.mu.
func (s *Server) addAttachment(channel string, f File) map[string]any {
	sig := make([]byte, 32)
	_, _ = rand.Read(sig)
	a := &attachment{id: s.ID(), channel: channel, sig: hex.EncodeToString(sig),
		file: File{Name: f.Name, ContentType: f.ContentType, Data: slices.Clone(f.Data)}}
	s.files[a.id] = a
	u := s.URL + attachmentsPath + channel + "/" + a.id + "/" + url.PathEscape(f.Name) +
		"?ex=6a000000&is=69f00000&hm=" + a.sig + "&"
	obj := map[string]any{"id": a.id, "filename": f.Name, "size": len(f.Data), "url": u, "proxy_url": u}
	if f.ContentType != "" {
		obj["content_type"] = f.ContentType
	}
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(f.Data)); err == nil {
		obj["width"], obj["height"] = cfg.Width, cfg.Height
	}
	return obj
}

// serveAttachment answers GET /attachments/{channel}/{id}/{filename} with
// a signed URL's file, 404 otherwise, as Discord's CDN does.
func (s *Server) serveAttachment(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, attachmentsPath), "/")
	var f File
	ok := r.Method == http.MethodGet && len(parts) == 3
	if ok {
		s.mu.Lock()
		a, found := s.files[parts[1]]
		ok = found && a.channel == parts[0] && a.file.Name == parts[2] && r.URL.Query().Get("hm") == a.sig
		if ok {
			f = a.file
		}
		s.mu.Unlock()
	}
	if !ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "This content is no longer available.")
		return
	}
	ct := f.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(f.Data)))
	_, _ = w.Write(f.Data)
}

// filesField is the name of an uploaded file's part: files[n].
var filesField = regexp.MustCompile(`^files\[(\d+)\]$`)

// multipartBody reads a multipart/form-data request body: payload_json
// into body and the files[n] parts by n. multi is false for any other
// content type.
func multipartBody(contentType string, raw []byte, body *map[string]any) (files map[int]File, multi bool, err error) {
	mt, params, _ := mime.ParseMediaType(contentType)
	if mt != "multipart/form-data" {
		return nil, false, nil
	}
	files = map[int]File{}
	mr := multipart.NewReader(bytes.NewReader(raw), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return files, true, nil
		}
		if err != nil {
			return nil, true, fmt.Errorf("multipart body: %w", err)
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, true, fmt.Errorf("multipart part %s: %w", p.FormName(), err)
		}
		if p.FormName() == "payload_json" {
			if err := json.Unmarshal(data, body); err != nil {
				return nil, true, fmt.Errorf("payload_json: %w", err)
			}
			continue
		}
		if m := filesField.FindStringSubmatch(p.FormName()); m != nil {
			n, _ := strconv.Atoi(m[1])
			files[n] = File{Name: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: data}
		}
	}
}

// attached returns a new message's files: those payload_json's
// attachments name (id n is files[n], filename renames it), then the
// others in order. A refusal is an HTTP status and Discord's message.
func attached(body map[string]any, files map[int]File) ([]File, int, string) {
	total := 0
	for _, f := range files {
		total += len(f.Data)
	}
	if total > maxUpload {
		return nil, http.StatusRequestEntityTooLarge, "Request entity too large"
	}
	var out []File
	used := map[int]bool{}
	refs, _ := body["attachments"].([]any)
	for _, ref := range refs {
		a, _ := ref.(map[string]any)
		var n int
		switch id := a["id"].(type) {
		case float64:
			n = int(id)
		case string:
			var err error
			if n, err = strconv.Atoi(id); err != nil {
				return nil, http.StatusBadRequest, "Invalid Form Body"
			}
		default:
			return nil, http.StatusBadRequest, "Invalid Form Body"
		}
		f, ok := files[n]
		if !ok || used[n] {
			return nil, http.StatusBadRequest, "Invalid Form Body"
		}
		if name, _ := a["filename"].(string); name != "" {
			f.Name = name
		}
		used[n] = true
		out = append(out, f)
	}
	rest := make([]int, 0, len(files))
	for n := range files {
		if !used[n] {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	for _, n := range rest {
		out = append(out, files[n])
	}
	return out, 0, ""
}
