// Package telegramtest is a fake Telegram Bot API server for tests: it
// serves /bot<token>/<method> for the methods agentgate calls, in the Bot
// API's wire format (multipart, form or JSON parameters; {"ok":…} answers),
// records what was sent and edited, serves getUpdates with offsets, answers
// getChatMember for the members it was given (Join), and can refuse calls
// (Refuse, Fail429: 429 with retry_after), not answer at all (Stall), or
// answer getUpdates at once instead of holding the long poll (HurryPolls).
package telegramtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Message is a message the bot sent, as last edited.
type Message struct {
	ChatID      int64
	ThreadID    int
	ID          int
	Text        string
	ParseMode   string
	ReplyMarkup string // JSON, as sent
	Edits       int
	// Kind is "photo" or "document" for a message sent with sendPhoto or
	// sendDocument, "" for a text message. Such a message carries its
	// caption (with ParseMode), the file's bytes and its name.
	Kind     string
	Caption  string
	File     []byte
	FileName string
}

// User is a Telegram user, as getChatMember answers with them.
type User struct {
	ID        int64
	FirstName string // required by Telegram
	LastName  string
	Username  string // without the @
}

// Server is the fake Bot API.
type Server struct {
	*httptest.Server
	Token string
	// BotID and BotUsername are what getMe answers.
	BotID       int64
	BotUsername string

	mu       sync.Mutex
	nextID   int
	messages []*Message
	answers  map[string]string // callback query id → text
	actions  []string          // sendChatAction: "<chat_id> <action>"
	commands string            // JSON of the last setMyCommands
	updates  []json.RawMessage // pending, with their ids
	ids      []int64
	offsets  []int64 // offsets getUpdates was called with
	refuse   map[string]refusal
	hurry    bool // getUpdates does not hold the poll
	stall    map[string]bool
	calls    map[string]int
	members  map[int64]map[int64]User // chat → user id → user
	files    map[string]*file         // file_id → file (files.go)
	fileSeq  int                      // numbers file ids
	strict   bool                     // refuse mentions of users in no chat
	stop     chan struct{}            // closed by Close: stalled calls end
	changed  chan struct{}
}

// New starts a fake Bot API for token.
func New(token string) *Server {
	s := &Server{Token: token, BotID: 7000000001, BotUsername: "agentgate_bot", answers: map[string]string{},
		refuse: map[string]refusal{}, stall: map[string]bool{}, calls: map[string]int{}, members: map[int64]map[int64]User{},
		files: map[string]*file{}, changed: make(chan struct{}), nextID: 100, stop: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close ends stalled calls, then closes the server.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	s.Server.Close()
}

// Changed returns a channel closed at the next change (a message sent or
// edited, a callback answered, an update taken).
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Server) notify() { close(s.changed); s.changed = make(chan struct{}) }

// Messages returns copies of the messages sent so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.messages))
	for i, m := range s.messages {
		out[i] = *m
		out[i].File = slices.Clone(m.File)
	}
	return out
}

// Delete removes message id of chat, as a user deleting it would.
func (s *Server) Delete(chat int64, id int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = slices.DeleteFunc(s.messages, func(m *Message) bool { return m.ChatID == chat && m.ID == id })
}

// Answer returns the text a callback query was answered with.
func (s *Server) Answer(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.answers[id]
	return a, ok
}

// Actions returns the chat actions sent (sendChatAction), oldest first,
// as "<chat_id> <action>".
func (s *Server) Actions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.actions)
}

// Commands returns the JSON of the last setMyCommands' commands.
func (s *Server) Commands() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commands
}

// Offsets returns the offsets getUpdates was called with.
func (s *Server) Offsets() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.offsets...)
}

// Push queues an update (JSON with its update_id) for getUpdates.
func (s *Server) Push(update string) {
	var u struct {
		ID int64 `json:"update_id"`
	}
	if err := json.Unmarshal([]byte(update), &u); err != nil {
		panic("telegramtest: update without update_id: " + err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, json.RawMessage(update))
	s.ids = append(s.ids, u.ID)
	s.notify()
}

// Fail429 makes the next n calls of method answer 429 with retry_after 1.
func (s *Server) Fail429(method string, n int) {
	s.Refuse(method, n, Refusal{Code: http.StatusTooManyRequests, Description: "Too Many Requests: retry after 1", RetryAfter: 1})
}

// Refusal is how the Bot API refuses a call: the HTTP status (and
// error_code) Code, the description and, for a 429, parameters.retry_after
// in seconds.
type Refusal struct {
	Code        int
	Description string
	RetryAfter  int
}

type refusal struct {
	Refusal
	n int // calls left to refuse; < 0: all
}

// Refuse makes the next n calls of method (n < 0: every one) answer with
// r: {"ok":false,"error_code":…,"description":…}. n = 0 ends a refusal.
func (s *Server) Refuse(method string, n int, r Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse[method] = refusal{Refusal: r, n: n}
}

// HurryPolls makes getUpdates answer at once, with no updates when it has
// none, whatever its timeout: a Bot API (or proxy) that does not hold the
// long poll.
func (s *Server) HurryPolls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hurry = true
}

// Join makes u a member of chat: getChatMember answers with them there.
func (s *Server) Join(chat int64, u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.members[chat] == nil {
		s.members[chat] = map[int64]User{}
	}
	s.members[chat][u.ID] = u
}

// Calls returns how often method was called.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Stall makes calls of method get no answer: each waits until its caller
// gives up.
func (s *Server) Stall(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall[method] = true
}

// RefuseStrangerMentions makes sendMessage and editMessageText refuse a
// MarkdownV2 text mentioning (tg://user?id=) a user who is a member of no
// chat here, as Telegram does when it will not let the bot mention a user
// (one who never was in the chat nor wrote to the bot).
func (s *Server) RefuseStrangerMentions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.strict = true
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/file/") {
		s.serveFile(w, r)
		return
	}
	prefix := "/bot" + s.Token + "/"
	if !strings.HasPrefix(r.URL.Path, prefix) {
		reply(w, http.StatusUnauthorized, nil, "Unauthorized")
		return
	}
	method := strings.TrimPrefix(r.URL.Path, prefix)
	p := params(r)
	s.mu.Lock()
	s.calls[method]++
	if s.stall[method] {
		s.mu.Unlock()
		select { // until the caller gives up, or the server closes
		case <-r.Context().Done():
		case <-s.stop:
		}
		return
	}
	if f := s.refuse[method]; f.n != 0 {
		if f.n > 0 {
			f.n--
			s.refuse[method] = f
		}
		s.mu.Unlock()
		answer := map[string]any{"ok": false, "error_code": f.Code, "description": f.Description}
		if f.RetryAfter > 0 {
			answer["parameters"] = map[string]any{"retry_after": f.RetryAfter}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.Code)
		_ = json.NewEncoder(w).Encode(answer)
		return
	}
	s.mu.Unlock()
	switch method {
	case "getMe":
		reply(w, 200, map[string]any{"id": s.BotID, "is_bot": true, "first_name": "agentgate", "username": s.BotUsername}, "")
	case "sendMessage":
		s.send(w, p)
	case "editMessageText":
		s.edit(w, p)
	case "answerCallbackQuery":
		s.mu.Lock()
		s.answers[p["callback_query_id"]] = p["text"]
		s.notify()
		s.mu.Unlock()
		reply(w, 200, true, "")
	case "setMyCommands":
		s.mu.Lock()
		s.commands = p["commands"]
		s.mu.Unlock()
		reply(w, 200, true, "")
	case "getUpdates":
		s.getUpdates(w, r, p)
	case "getChatMember":
		s.chatMember(w, p)
	case "getFile":
		s.getFile(w, p)
	case "sendPhoto", "sendDocument":
		s.sendFile(w, r, method, p)
	case "sendChatAction":
		if p["chat_id"] == "" || p["action"] == "" {
			reply(w, http.StatusBadRequest, nil, "Bad Request: chat_id and action are required")
			return
		}
		s.mu.Lock()
		s.actions = append(s.actions, p["chat_id"]+" "+p["action"])
		s.mu.Unlock()
		reply(w, 200, true, "")
	default:
		reply(w, http.StatusNotFound, nil, "Not Found: method not found")
	}
}

// badMarkdownV2 is Telegram's refusal of MarkdownV2 text with a reserved
// character left unescaped outside code and link URLs (the usual mistake),
// or "".
func badMarkdownV2(text string) string {
	code := false
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '\\':
			i++ // escapes the next character
		case c == '`':
			code = !code
		case !code && strings.HasPrefix(text[i:], "]("):
			// An inline link's URL: only ) and \ are escaped there.
			for i += 2; i < len(text) && text[i] != ')'; i++ {
				if text[i] == '\\' {
					i++
				}
			}
		case !code && strings.IndexByte(".!-+=#{}", c) >= 0:
			return "Bad Request: can't parse entities: Character '" + string(c) + "' is reserved and must be escaped with the preceding '\\'"
		}
	}
	return ""
}

func badText(p map[string]string) string {
	if p["parse_mode"] != "MarkdownV2" {
		return ""
	}
	return badMarkdownV2(p["text"])
}

// mentionPattern is an inline mention of a user by id in MarkdownV2.
var mentionPattern = regexp.MustCompile(`\]\(tg://user\?id=(\d+)\)`)

// badMention is Telegram's refusal of a mention of a user in no chat here
// (with RefuseStrangerMentions), or "".
func (s *Server) badMention(p map[string]string) string {
	if p["parse_mode"] != "MarkdownV2" {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.strict {
		return ""
	}
	for _, m := range mentionPattern.FindAllStringSubmatch(p["text"], -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		known := false
		for _, members := range s.members {
			_, in := members[id]
			known = known || in
		}
		if !known {
			return "Bad Request: ENTITY_MENTION_USER_INVALID"
		}
	}
	return ""
}

// chatMember answers getChatMember: a member's ChatMemberMember, else
// Telegram's refusal of a user who never was in the chat.
func (s *Server) chatMember(w http.ResponseWriter, p map[string]string) {
	chat, err1 := strconv.ParseInt(p["chat_id"], 10, 64)
	id, err2 := strconv.ParseInt(p["user_id"], 10, 64)
	if err1 != nil || err2 != nil {
		reply(w, http.StatusBadRequest, nil, "Bad Request: chat_id and user_id are required")
		return
	}
	s.mu.Lock()
	u, ok := s.members[chat][id]
	s.mu.Unlock()
	if !ok {
		reply(w, http.StatusBadRequest, nil, "Bad Request: user not found")
		return
	}
	user := map[string]any{"id": u.ID, "is_bot": false, "first_name": u.FirstName}
	if u.LastName != "" {
		user["last_name"] = u.LastName
	}
	if u.Username != "" {
		user["username"] = u.Username
	}
	reply(w, 200, map[string]any{"status": "member", "user": user}, "")
}

// badMarkup is Telegram's refusal of a reply_markup it cannot take, or "".
func badMarkup(markup string) string {
	if strings.Contains(strings.ReplaceAll(markup, " ", ""), `"copy_text":{"text":""}`) {
		return "Bad Request: BUTTON_COPY_TEXT_INVALID"
	}
	return ""
}

func (s *Server) send(w http.ResponseWriter, p map[string]string) {
	if bad := badMarkup(p["reply_markup"]) + badText(p) + s.badMention(p); bad != "" {
		reply(w, http.StatusBadRequest, nil, bad)
		return
	}
	chat, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil || p["text"] == "" {
		reply(w, http.StatusBadRequest, nil, "Bad Request: chat_id and text are required")
		return
	}
	if n := len([]rune(p["text"])); n > 2*4096 { // escapes do not count; a loose check
		reply(w, http.StatusBadRequest, nil, "Bad Request: message is too long")
		return
	}
	thread, _ := strconv.Atoi(p["message_thread_id"])
	s.mu.Lock()
	s.nextID++
	m := &Message{ChatID: chat, ThreadID: thread, ID: s.nextID, Text: p["text"], ParseMode: p["parse_mode"], ReplyMarkup: p["reply_markup"]}
	s.messages = append(s.messages, m)
	s.notify()
	s.mu.Unlock()
	reply(w, 200, map[string]any{"message_id": m.ID, "date": time.Now().Unix(), "text": m.Text,
		"chat": map[string]any{"id": chat, "type": chatType(chat)}}, "")
}

func (s *Server) edit(w http.ResponseWriter, p map[string]string) {
	if bad := badMarkup(p["reply_markup"]) + badText(p) + s.badMention(p); bad != "" {
		reply(w, http.StatusBadRequest, nil, bad)
		return
	}
	chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
	id, _ := strconv.Atoi(p["message_id"])
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.messages {
		if m.ChatID == chat && m.ID == id {
			if m.Text == p["text"] && m.ReplyMarkup == p["reply_markup"] {
				reply(w, http.StatusBadRequest, nil, "Bad Request: message is not modified")
				return
			}
			m.Text, m.ReplyMarkup, m.Edits = p["text"], p["reply_markup"], m.Edits+1
			s.notify()
			reply(w, 200, map[string]any{"message_id": id, "date": time.Now().Unix(), "text": m.Text,
				"chat": map[string]any{"id": chat, "type": chatType(chat)}}, "")
			return
		}
	}
	reply(w, http.StatusBadRequest, nil, "Bad Request: message to edit not found")
}

func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p map[string]string) {
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	timeout, _ := strconv.Atoi(p["timeout"])
	deadline := time.After(time.Duration(timeout) * time.Second)
	for {
		s.mu.Lock()
		s.offsets = append(s.offsets, offset)
		// Confirm the updates below offset: they are gone for good.
		for len(s.ids) > 0 && offset > 0 && s.ids[0] < offset {
			s.ids, s.updates = s.ids[1:], s.updates[1:]
		}
		if len(s.updates) > 0 {
			out := append([]json.RawMessage(nil), s.updates...)
			s.notify()
			s.mu.Unlock()
			reply(w, 200, out, "")
			return
		}
		if s.hurry {
			s.mu.Unlock()
			reply(w, 200, []any{}, "")
			return
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			reply(w, 200, []any{}, "")
			return
		case <-r.Context().Done():
			return
		}
	}
}

// params reads a Bot API call's parameters, sent as multipart (as
// go-telegram/bot does), a form, a query string or JSON; JSON values that
// are not strings are kept as their JSON text.
func params(r *http.Request) map[string]string {
	out := map[string]string{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]json.RawMessage
		_ = json.NewDecoder(r.Body).Decode(&m)
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				out[k] = s
			} else {
				out[k] = string(v)
			}
		}
		return out
	}
	_ = r.ParseMultipartForm(1 << 20)
	for k, v := range r.Form {
		out[k] = v[0]
	}
	return out
}

func reply(w http.ResponseWriter, code int, result any, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if code != 200 {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": code, "description": desc})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func chatType(id int64) string {
	if id < 0 {
		return "supergroup"
	}
	return "private"
}
