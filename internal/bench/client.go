package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentgate/agentgate/core"
)

// client talks to one server's REST API: the few JSON calls the bench makes.
type client struct {
	base string // http://host:port
	http *http.Client
}

// apiRun is a run as the API returns it.
type apiRun struct {
	core.Run
	PendingApprovals []core.Approval `json:"pending_approvals"`
}

// do sends body (when not nil) as JSON and decodes the answer into out. An
// answer of 400 or more is an error with the API's code and message.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "agentgate-bench")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the server at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
			return fmt.Errorf("%s (%d http)", strings.TrimSpace(string(b)), resp.StatusCode)
		}
		return fmt.Errorf("%s (%d %s)", e.Error.Message, resp.StatusCode, e.Error.Code)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
