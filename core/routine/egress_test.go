package routine_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/egress"
	"github.com/agentgate/agentgate/test/testnet"
)

// opaque is the history of a first failed attempt at a guarded webhook,
// whatever the reason.
const opaque = "webhook: retrying (attempt 1 of 12): delivery failed (see the gateway log)"

func allowing(t *testing.T, allow ...string) func(*env) {
	t.Helper()
	p, err := egress.New(allow)
	if err != nil {
		t.Fatal(err)
	}
	return func(e *env) { e.egress = p }
}

// createAPI creates routine id through the API path, delivering to deliverTo.
func (e *env) createAPI(id, deliverTo string) {
	e.t.Helper()
	if _, err := e.s.Create(e.t.Context(), id, core.RoutineSpec{Agent: str("ops"), Schedule: str("@daily"),
		Input: str("report"), DeliverTo: str(deliverTo)}); err != nil {
		e.t.Fatal(err)
	}
}

// storeAPI stores an API routine delivering to deliverTo as a gateway
// before the create-time check did (or under an egress.allow since
// narrowed): only the dial-time check stands between it and the address.
func (e *env) storeAPI(id, deliverTo string) {
	e.t.Helper()
	d := def(id, "@daily")
	d.DeliverTo = deliverTo
	if _, err := e.db.CreateRoutine(e.t.Context(), d, e.clock.Now()); err != nil {
		e.t.Fatal(err)
	}
}

// runOnce triggers routine id, finishes the run and handles its result
// job once; it returns HandleResult's error and the history's delivery.
func (e *env) runOnce(id string) (error, string) {
	e.t.Helper()
	run, err := e.s.Trigger(e.t.Context(), id, "", "")
	if err != nil {
		e.t.Fatal(err)
	}
	herr := e.s.HandleResult(e.t.Context(), e.finish(run, core.RunCompleted))
	h := e.history(id)
	return herr, h[len(h)-1].Delivery
}

// An API routine's webhook may not reach loopback until egress.allow says
// so: a URL that shows it is refused when the routine is created or
// changed, and nothing reaches the server.
func TestAPIWebhookToAnInternalAddressIsRefusedAtCreate(t *testing.T) {
	t.Parallel()
	hook := newWebhook(t, 0)
	_, port, _ := net.SplitHostPort(hook.srv.Listener.Addr().String())
	e := newEnvWith(t, utc("2026-01-09 10:30:00"), allowing(t, "10.0.0.0/8"))
	for _, url := range []string{"http://169.254.169.254/latest/meta-data/", hook.srv.URL + "/hook",
		"http://localhost:" + port + "/hook", "http://[::1]:" + port, "http://192.168.1.1/"} {
		_, err := e.s.Create(t.Context(), "mine", core.RoutineSpec{Agent: str("ops"), Schedule: str("@daily"),
			Input: str("report"), DeliverTo: str("webhook:" + url)})
		var ie *core.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "deliver_to") || !strings.Contains(err.Error(), "egress.allow") {
			t.Errorf("create delivering to %s: %v; want an input error naming deliver_to and egress.allow", url, err)
		}
		if _, err := e.db.GetRoutine(t.Context(), "mine"); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("refused routine to %s was stored: %v", url, err)
		}
	}
	e.createAPI("mine", "webhook:http://10.1.2.3/hook") // egress.allow lists 10.0.0.0/8
	_, err := e.s.Update(t.Context(), "mine", core.RoutineSpec{DeliverTo: str("webhook:http://169.254.169.254/")})
	if !strings.Contains(fmt.Sprint(err), "egress.allow") {
		t.Errorf("PATCH to the metadata address: %v; want it refused", err)
	}
	if r, _ := e.db.GetRoutine(t.Context(), "mine"); r.DeliverTo != "webhook:http://10.1.2.3/hook" {
		t.Errorf("refused PATCH changed deliver_to to %q", r.DeliverTo)
	}
	if n := len(hook.attempts()); n != 0 {
		t.Errorf("webhook got %d requests", n)
	}
}

// A stored API routine's webhook (made before egress.allow was narrowed)
// is checked again at every delivery.
func TestAPIWebhookNeedsEgressAllow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		allow []string
		want  string
	}{
		{"default", nil, opaque},
		{"other network allowed", []string{"10.0.0.0/8"}, opaque},
		{"127.0.0.1 allowed", []string{"127.0.0.1"}, "delivered"},
		{"loopback CIDR allowed", []string{"127.0.0.0/8"}, "delivered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hook := newWebhook(t, 0)
			e := newEnvWith(t, utc("2026-01-09 10:30:00"), allowing(t, tc.allow...))
			e.storeAPI("mine", "webhook:"+hook.srv.URL+"/hook")
			err, delivery := e.runOnce("mine")
			if delivery != tc.want {
				t.Errorf("delivery = %q, want %q", delivery, tc.want)
			}
			if got := len(hook.attempts()); tc.want == "delivered" && (err != nil || got != 1) {
				t.Errorf("allowed: HandleResult = %v, %d requests; want one delivery", err, got)
			} else if tc.want != "delivered" && (err == nil || got != 0) {
				t.Errorf("refused: HandleResult = %v, %d requests; want an error (the job retries) and nothing sent", err, got)
			}
		})
	}
}

// Whatever went wrong — the policy refused the address (the metadata
// address, directly or through a redirect), the port is closed, the
// receiver failed — the history says the same; the log says what it was.
func TestGuardedHistoryIsOpaque(t *testing.T) {
	t.Parallel()
	closedPort := "http://" + testnet.RefusingAddr(t) + "/hook"
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	eof := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(eof.Close)

	for _, tc := range []struct{ name, url, log string }{
		{"metadata", "http://169.254.169.254/latest/meta-data/", "denied=true"},
		{"private", "http://10.0.0.1/hook", "denied=true"},
		{"redirect to metadata", redirect.URL, "denied=true"},
		{"closed port", closedPort, "connection refused"},
		{"500", failing.URL, "500 Internal Server Error"},
		{"EOF", eof.URL, "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			e := newEnvWith(t, utc("2026-01-09 10:30:00"), func(e *env) {
				allowing(t, "127.0.0.1")(e)
				e.log = slog.New(slog.NewTextHandler(&logs, nil))
			})
			e.storeAPI("mine", "webhook:"+tc.url)
			err, delivery := e.runOnce("mine")
			if err == nil || err.Error() != "delivery failed (see the gateway log)" {
				t.Errorf("HandleResult = %v, want the opaque error (the job retries)", err)
			}
			if delivery != opaque {
				t.Errorf("delivery = %q, want %q", delivery, opaque)
			}
			if !strings.Contains(logs.String(), "routine webhook delivery failed") || !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log = %s; want the reason (%s)", logs.String(), tc.log)
			}
			if strings.Contains(logs.String(), "/latest/meta-data") {
				t.Errorf("log names the URL's path: %s", logs.String())
			}
		})
	}
}

// The file's routines are the operator's: their webhooks reach loopback
// with no egress.allow, and their history says why a delivery failed. A
// deliver_to changed through the API is not the operator's any more.
func TestConfigWebhookIsTrusted(t *testing.T) {
	t.Parallel()
	hook := newWebhook(t, 0)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	e := newEnv(t, utc("2026-01-09 10:30:00"))
	d := def("file", "@hourly")
	d.DeliverTo = "webhook:" + hook.srv.URL + "/hook"
	bad := def("bad", "@hourly")
	bad.DeliverTo = "webhook:" + failing.URL
	e.sync(d, bad)
	if err, delivery := e.runOnce("file"); err != nil || delivery != "delivered" || len(hook.attempts()) != 1 {
		t.Fatalf("config routine to loopback: %v, %q, %d requests; want delivered", err, delivery, len(hook.attempts()))
	}
	if _, delivery := e.runOnce("bad"); !strings.Contains(delivery, "answered 500 Internal Server Error") {
		t.Errorf("config routine to a failing receiver: delivery = %q, want the status", delivery)
	}

	other := newWebhook(t, 0)
	if _, err := e.s.Update(t.Context(), "file", core.RoutineSpec{DeliverTo: str("webhook:" + other.srv.URL)}); err == nil {
		t.Fatal("PATCH of a config routine's deliver_to to loopback was accepted")
	}
	moved := "webhook:" + other.srv.URL // as stored by a gateway before that check
	if _, err := e.db.UpdateRoutine(t.Context(), "file", core.RoutinePatch{DeliverTo: &moved, At: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if err, delivery := e.runOnce("file"); err == nil || delivery != opaque || len(other.attempts()) != 0 {
		t.Errorf("config routine whose deliver_to was changed through the API: %v, %q, %d requests; want it guarded", err, delivery, len(other.attempts()))
	}
	// Back to the file's value: the operator's again.
	if _, err := e.s.Update(t.Context(), "file", core.RoutineSpec{DeliverTo: str(d.DeliverTo)}); err != nil {
		t.Fatal(err)
	}
	if err, delivery := e.runOnce("file"); err != nil || delivery != "delivered" || len(hook.attempts()) != 2 {
		t.Errorf("config routine back at the file's deliver_to: %v, %q; want delivered", err, delivery)
	}
}

// A routine deleted while its result waits for delivery delivers nothing,
// and its kept history says why.
func TestDeletedRoutineDeliversNothing(t *testing.T) {
	t.Parallel()
	hook := newWebhook(t, 0)
	e := newEnvWith(t, utc("2026-01-09 10:30:00"), allowing(t, "127.0.0.1"))
	e.createAPI("mine", "webhook:"+hook.srv.URL)
	run, err := e.s.Trigger(t.Context(), "mine", "", "")
	if err != nil {
		t.Fatal(err)
	}
	job := e.finish(run, core.RunCompleted)
	if err := e.s.Delete(t.Context(), "mine"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.HandleResult(t.Context(), job); err != nil {
		t.Fatalf("HandleResult after delete: %v, want nil (nothing to retry)", err)
	}
	if n := len(hook.attempts()); n != 0 {
		t.Errorf("webhook got %d requests for a deleted routine", n)
	}
	h, err := e.db.RoutineHistory(t.Context(), "mine", core.ListOptions{})
	if err != nil || len(h.Items) != 1 || h.Items[0].Delivery != "not delivered: the routine no longer exists" {
		t.Errorf("history after delete = %+v, %v", h.Items, err)
	}
}

// A routine deleted and made anew under its id (by another admin, with
// another target) does not deliver what the old one's run answered, nor
// count its failure.
func TestRemadeRoutineDeliversNotTheOldRuns(t *testing.T) {
	t.Parallel()
	hook := newWebhook(t, 0)
	e := newEnvWith(t, utc("2026-01-09 10:30:00"), allowing(t, "127.0.0.1"))
	e.createAPI("mine", "webhook:"+hook.srv.URL+"/old-team")
	run, err := e.s.Trigger(t.Context(), "mine", "", "")
	if err != nil {
		t.Fatal(err)
	}
	job := e.finish(run, core.RunFailed)
	if err := e.s.Delete(t.Context(), "mine"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	e.createAPI("mine", "webhook:"+hook.srv.URL+"/new-team")
	if err := e.s.HandleResult(t.Context(), job); err != nil {
		t.Fatalf("HandleResult after the routine was made anew: %v, want nil (nothing to retry)", err)
	}
	if n := len(hook.attempts()); n != 0 {
		t.Errorf("the new routine's webhook got %d requests for the old routine's run", n)
	}
	if r := e.routine("mine"); r.ConsecutiveFailures != 0 {
		t.Errorf("the new routine counts %d failures, want the old run's not counted", r.ConsecutiveFailures)
	}
}
