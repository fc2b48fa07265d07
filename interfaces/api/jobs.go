package api

import (
	"net/http"

	"github.com/agentgate/agentgate/core"
)

// maxDeadLetters caps GET /api/v1/jobs?status=dead.
const maxDeadLetters = 500

// listJobs answers the dead-lettered jobs, oldest first: jobs that failed
// every attempt (a chat reply while the platform was down, a routine's
// delivery), to look at and retry.
func (s *server) listJobs(w http.ResponseWriter, r *http.Request) {
	if st := r.URL.Query().Get("status"); st != "dead" {
		writeError(w, http.StatusBadRequest, "bad_request", "status: give status=dead (dead-lettered jobs are the ones listed)")
		return
	}
	limit, err := intParam(r, "limit", 100)
	if err != nil || limit < 1 || limit > maxDeadLetters {
		writeError(w, http.StatusBadRequest, "bad_request", "limit: must be a number from 1 to 500")
		return
	}
	jobs, err := s.cfg.Jobs.DeadLetters(r.Context(), int(limit))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, core.Page[core.Job]{Items: append([]core.Job{}, jobs...)})
}

// retryJob sends a dead-lettered job again, due now with its attempts
// counted anew; audited.
func (s *server) retryJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	j, err := s.cfg.Jobs.RetryDead(r.Context(), id)
	if err != nil {
		s.fail(w, err)
		return
	}
	p := caller(r)
	s.audit(r.Context(), core.AuditEntry{Principal: p.ID, Route: p.Route, Action: core.AuditJobRetry, Target: id, Detail: j.Kind})
	writeJSON(w, http.StatusOK, j)
}
