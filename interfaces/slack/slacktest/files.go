package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Paths of the fake's file service: files.slack.com serves url_private under /files-pri/
// and takes uploads under /upload/v1/.
const (
	filesPath  = "/files-pri/"
	uploadPath = "/upload/v1/"
)

// maxUpload bounds what the fake's upload URL reads.
const maxUpload = 64 << 20

// File is a file the fake holds: added with AddFile or uploaded through
// files.getUploadURLExternal and files.completeUploadExternal.
type File struct {
	ID       string // "F…"
	Name     string
	Title    string
	Mimetype string
	Data     []byte
}

// Upload is a file shared with files.completeUploadExternal.
type Upload struct {
	Channel  string // channel_id; "" when the file was not shared in a channel
	ThreadTS string // thread_ts; "" for a top-level share
	Name     string // filename given to files.getUploadURLExternal
	Title    string // title given to files.completeUploadExternal
	Data     []byte // the bytes POSTed to the upload URL
}

// pendingUpload is a file between files.getUploadURLExternal and its completion.
type pendingUpload struct {
	id       string
	name     string
	data     []byte
	uploaded bool
}

// AddFile stores a file as if a user had shared it and returns the file object Slack
// events carry in "files": id, name, mimetype, filetype, size, url_private and
// url_private_download. Both URLs point at the fake, which serves the bytes only to a GET
// with the bot token as Bearer and answers 404 otherwise, like files.slack.com for a token
// that cannot read the file.
func (s *Server) AddFile(name, mimetype string, data []byte) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.addFile(name, name, mimetype, data)
	return s.fileObject(f)
}

// Uploads returns the files shared with files.completeUploadExternal, oldest first.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.uploads)
	for i := range out {
		out[i].Data = slices.Clone(out[i].Data)
	}
	return out
}

// addFile stores a file and returns it. The caller holds s.mu.
func (s *Server) addFile(name, title, mimetype string, data []byte) *File {
	s.fileSeq++
	f := &File{ID: fmt.Sprintf("F%010d", s.fileSeq), Name: name, Title: title, Mimetype: mimetype, Data: slices.Clone(data)}
	s.files[f.ID] = f
	return f
}

// fileObject is f as Slack's file object. The caller holds s.mu.
func (s *Server) fileObject(f *File) map[string]any {
	base := s.URL + filesPath + DefaultTeamID + "-" + f.ID + "/"
	name := url.PathEscape(f.Name)
	return map[string]any{
		"id":                   f.ID,
		"created":              1700000000,
		"timestamp":            1700000000,
		"name":                 f.Name,
		"title":                f.Title,
		"mimetype":             f.Mimetype,
		"filetype":             filetype(f.Name),
		"pretty_type":          strings.ToUpper(filetype(f.Name)),
		"user_team":            DefaultTeamID,
		"editable":             false,
		"size":                 len(f.Data),
		"mode":                 "hosted",
		"is_external":          false,
		"external_type":        "",
		"is_public":            false,
		"public_url_shared":    false,
		"display_as_bot":       false,
		"url_private":          base + name,
		"url_private_download": base + "download/" + name,
		"permalink":            "https://agentgate-test.slack.com/files/" + DefaultUserID + "/" + f.ID + "/" + name,
	}
}

// filetype is Slack's filetype for a file name: its extension, with Slack's names for a
// few.
func filetype(name string) string {
	ext := strings.ToLower(strings.TrimPrefix(path.Ext(name), "."))
	switch ext {
	case "":
		return "binary"
	case "txt":
		return "text"
	case "jpeg":
		return "jpg"
	case "md":
		return "markdown"
	case "py":
		return "python"
	}
	return ext
}

// serveFile answers GET /files-pri/{team}-{file}/[download/]{name} with the file's bytes
// when the request carries the bot token as Bearer, 404 otherwise.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.NotFound(w, r)
		return
	}
	dir, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, filesPath), "/")
	_, id, _ := strings.Cut(dir, "-")
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	f, ok := s.files[id]
	var data []byte
	var mt string
	if ok {
		data, mt = f.Data, f.Mimetype
	}
	ok = ok && token != "" && token == s.Token
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if mt == "" {
		mt = "application/octet-stream"
	}
	w.Header().Set("Content-Type", mt)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(data)
	}
}

// serveUpload answers a POST to an upload_url: the file as raw bytes or as the file part
// of a multipart form. It answers 200 "OK - <bytes>" as Slack does, 404 for an unknown URL.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	key := strings.TrimPrefix(r.URL.Path, uploadPath)
	data, err := readUpload(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	p, ok := s.pending[key]
	if ok {
		p.data, p.uploaded = data, true
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "OK - %d", len(data))
}

// readUpload returns the uploaded bytes: the first file part of a multipart body, or the
// whole body.
func readUpload(r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(nil, r.Body, maxUpload)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		return io.ReadAll(body)
	}
	r.Body = body
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, err
	}
	for {
		part, err := mr.NextPart()
		if err != nil {
			return nil, fmt.Errorf("multipart upload without a file part: %w", err)
		}
		if part.FileName() != "" {
			return io.ReadAll(part)
		}
	}
}

// getUploadURL applies files.getUploadURLExternal. The caller holds s.mu.
func (s *Server) getUploadURL(a map[string]string) response {
	length, err := strconv.Atoi(a["length"])
	if a["filename"] == "" || err != nil || length <= 0 {
		return response{"ok": false, "error": "missing_argument"}
	}
	s.fileSeq++
	p := &pendingUpload{id: fmt.Sprintf("F%010d", s.fileSeq), name: a["filename"]}
	key := fmt.Sprintf("CwABAAAA%010d", s.fileSeq)
	s.pending[key] = p
	return response{"ok": true, "upload_url": s.URL + uploadPath + key, "file_id": p.id}
}

// completeUpload applies files.completeUploadExternal: the uploaded files become files of
// the fake and, with a channel, a message sharing them (in thread_ts when given). The
// caller holds s.mu.
func (s *Server) completeUpload(c Call) response {
	a := c.Args
	var files []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(a["files"]), &files); err != nil || len(files) == 0 {
		return response{"ok": false, "error": "invalid_arguments"}
	}
	channel := a["channel_id"]
	if channel == "" {
		channel, _, _ = strings.Cut(a["channels"], ",")
	}
	if channel != "" && s.channels != nil && !s.channels[channel] {
		return response{"ok": false, "error": "channel_not_found"}
	}
	keys := make([]string, len(files))
	for i, f := range files {
		for k, p := range s.pending {
			if p.id == f.ID && p.uploaded {
				keys[i] = k
			}
		}
		if keys[i] == "" {
			return response{"ok": false, "error": "file_not_found"}
		}
	}
	var shared []File
	var objects []map[string]any
	for i, f := range files {
		p := s.pending[keys[i]]
		delete(s.pending, keys[i])
		title := f.Title
		if title == "" {
			title = p.name
		}
		mt := mime.TypeByExtension(path.Ext(p.name))
		if mt == "" {
			mt = "application/octet-stream"
		}
		file := &File{ID: p.id, Name: p.name, Title: title, Mimetype: mt, Data: p.data}
		s.files[file.ID] = file
		s.uploads = append(s.uploads, Upload{Channel: channel, ThreadTS: a["thread_ts"], Name: p.name, Title: title, Data: p.data})
		shared = append(shared, *file)
		objects = append(objects, s.fileObject(file))
	}
	if channel != "" {
		s.add(&Message{Channel: channel, TS: s.nextTS(), ThreadTS: a["thread_ts"], Text: a["initial_comment"], Files: shared})
	}
	return response{"ok": true, "files": objects}
}
