package telegramtest

import (
	"bytes"
	"fmt"
	"image"
	_ "image/gif" // DecodeConfig of sent photos
	_ "image/jpeg"
	_ "image/png"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// maxCaption is Telegram's limit on a caption, in UTF-16 code units after
// entity parsing.
const maxCaption = 1024

// file is a file the fake holds: added with AddFile or sent with
// sendPhoto or sendDocument.
type file struct {
	id, uniqueID string
	path         string // file_path getFile answers
	name         string
	data         []byte
}

// AddFile stores data as a file a user sent (a document's or photo's
// file_id) and returns its file_id. getFile answers with its file_size and
// file_path, and GET /file/bot<token>/<file_path> serves the bytes.
func (s *Server) AddFile(data []byte) (fileID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addFile("", data).id
}

// addFile stores a file. The caller holds s.mu.
func (s *Server) addFile(name string, data []byte) *file {
	s.fileSeq++
	dir := "documents"
	if strings.HasPrefix(http.DetectContentType(data), "image/") {
		dir = "photos"
	}
	f := &file{
		id:       fmt.Sprintf("BQACAgIAAxkBAAIB%08dAAE", s.fileSeq),
		uniqueID: fmt.Sprintf("AgAD%08d", s.fileSeq),
		path:     fmt.Sprintf("%s/file_%d%s", dir, s.fileSeq, ext(name)),
		name:     name,
		data:     slices.Clone(data),
	}
	s.files[f.id] = f
	return f
}

func ext(name string) string {
	if i := strings.LastIndexByte(name, '.'); i > 0 && !strings.ContainsAny(name[i:], "/\\") {
		return name[i:]
	}
	return ""
}

// getFile answers getFile: the File object, {file_id, file_unique_id,
// file_size, file_path}.
func (s *Server) getFile(w http.ResponseWriter, p map[string]string) {
	s.mu.Lock()
	f, ok := s.files[p["file_id"]]
	s.mu.Unlock()
	if !ok {
		reply(w, http.StatusBadRequest, nil, "Bad Request: invalid file_id")
		return
	}
	reply(w, http.StatusOK, map[string]any{"file_id": f.id, "file_unique_id": f.uniqueID, "file_size": len(f.data),
		"file_path": f.path}, "")
}

// serveFile answers GET /file/bot<token>/<file_path> with the file's bytes,
// 404 for another token or path.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+s.Token+"/")
	var data []byte
	if ok && r.Method == http.MethodGet {
		ok = false
		s.mu.Lock()
		for _, f := range s.files {
			if f.path == path {
				data, ok = f.data, true
			}
		}
		s.mu.Unlock()
	}
	if !ok {
		reply(w, http.StatusNotFound, nil, "Not Found")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

// sendFile answers sendPhoto and sendDocument: the file as the multipart
// part "photo" or "document" (or the file_id of a file the fake holds), an
// optional caption (checked as MarkdownV2 with parse_mode MarkdownV2) and
// message_thread_id. A photo must be an image.
func (s *Server) sendFile(w http.ResponseWriter, r *http.Request, method string, p map[string]string) {
	kind := "document"
	if method == "sendPhoto" {
		kind = "photo"
	}
	chat, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil {
		reply(w, http.StatusBadRequest, nil, "Bad Request: chat_id is empty")
		return
	}
	name, data, ok := upload(r, kind)
	if !ok {
		s.mu.Lock()
		f, held := s.files[p[kind]]
		s.mu.Unlock()
		if !held {
			reply(w, http.StatusBadRequest, nil, "Bad Request: there is no "+kind+" in the request")
			return
		}
		name, data = f.name, f.data
	}
	switch {
	case len(data) == 0:
		reply(w, http.StatusBadRequest, nil, "Bad Request: file must be non-empty")
		return
	case kind == "photo" && !strings.HasPrefix(http.DetectContentType(data), "image/"):
		reply(w, http.StatusBadRequest, nil, "Bad Request: IMAGE_PROCESS_FAILED")
		return
	case p["parse_mode"] == "MarkdownV2" && badMarkdownV2(p["caption"]) != "":
		reply(w, http.StatusBadRequest, nil, badMarkdownV2(p["caption"]))
		return
	case len(utf16.Encode([]rune(p["caption"]))) > 2*maxCaption: // escapes do not count; a loose check
		reply(w, http.StatusBadRequest, nil, "Bad Request: message caption is too long")
		return
	}
	thread, _ := strconv.Atoi(p["message_thread_id"])
	s.mu.Lock()
	f := s.addFile(name, data)
	s.nextID++
	m := &Message{ChatID: chat, ThreadID: thread, ID: s.nextID, ParseMode: p["parse_mode"], ReplyMarkup: p["reply_markup"],
		Kind: kind, Caption: p["caption"], File: slices.Clone(data), FileName: name}
	s.messages = append(s.messages, m)
	s.notify()
	s.mu.Unlock()
	msg := map[string]any{"message_id": m.ID, "date": time.Now().Unix(), "chat": map[string]any{"id": chat, "type": chatType(chat)}}
	if thread != 0 {
		msg["message_thread_id"] = thread
		msg["is_topic_message"] = true
	}
	if m.Caption != "" {
		msg["caption"] = m.Caption
	}
	if kind == "photo" {
		size := map[string]any{"file_id": f.id, "file_unique_id": f.uniqueID, "file_size": len(data), "width": 0, "height": 0}
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
			size["width"], size["height"] = cfg.Width, cfg.Height
		}
		msg["photo"] = []any{size}
	} else {
		doc := map[string]any{"file_id": f.id, "file_unique_id": f.uniqueID, "file_size": len(data)}
		if name != "" {
			doc["file_name"] = name
		}
		if mt, _, _ := strings.Cut(mime.TypeByExtension(ext(name)), ";"); mt != "" {
			doc["mime_type"] = mt
		}
		msg["document"] = doc
	}
	reply(w, http.StatusOK, msg, "")
}

// upload returns the file sent in the multipart part field.
func upload(r *http.Request, field string) (name string, data []byte, ok bool) {
	fh := filePart(r, field)
	if fh == nil {
		return "", nil, false
	}
	f, err := fh.Open()
	if err != nil {
		return "", nil, false
	}
	defer f.Close()
	data, err = io.ReadAll(f)
	return fh.Filename, data, err == nil
}

func filePart(r *http.Request, field string) *multipart.FileHeader {
	if r.MultipartForm == nil || len(r.MultipartForm.File[field]) == 0 {
		return nil
	}
	return r.MultipartForm.File[field][0]
}
