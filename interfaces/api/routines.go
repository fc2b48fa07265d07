package api

import (
	"context"
	"net/http"

	"github.com/agentgate/agentgate/core"
)

// Routines is the routine service the API exposes (*routine.Scheduler).
type Routines interface {
	List(ctx context.Context, o core.ListOptions) (core.Page[core.Routine], error)
	Get(ctx context.Context, id string) (core.Routine, error)
	History(ctx context.Context, id string, o core.ListOptions) (core.Page[core.RoutineEntry], error)
	// Trigger fires the routine now with extra appended to its input.
	Trigger(ctx context.Context, id, extra, userID string) (core.Run, error)
	Enable(ctx context.Context, id string) (core.Routine, error)
	Disable(ctx context.Context, id string) (core.Routine, error)
}

// routineRoutes registers the routine routes on mux.
func (s *server) routineRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/routines", s.listRoutines)
	mux.HandleFunc("GET /api/v1/routines/{id}", s.getRoutine)
	mux.HandleFunc("GET /api/v1/routines/{id}/runs", s.routineHistory)
	mux.HandleFunc("POST /api/v1/routines/{id}/trigger", s.triggerRoutine)
	mux.HandleFunc("POST /api/v1/routines/{id}/enable", s.toggleRoutine(true))
	mux.HandleFunc("POST /api/v1/routines/{id}/disable", s.toggleRoutine(false))
}

func (s *server) listRoutines(w http.ResponseWriter, r *http.Request) {
	opts, ok := listOptions(w, r)
	if !ok {
		return
	}
	page, err := s.cfg.Routines.List(r.Context(), opts)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(page))
}

func (s *server) getRoutine(w http.ResponseWriter, r *http.Request) {
	rt, err := s.cfg.Routines.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rt)
}

func (s *server) routineHistory(w http.ResponseWriter, r *http.Request) {
	opts, ok := listOptions(w, r)
	if !ok {
		return
	}
	page, err := s.cfg.Routines.History(r.Context(), r.PathValue("id"), opts)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(page))
}

type triggerRequest struct {
	// Input is appended to the routine's input for this run.
	Input string `json:"input"`
	// UserID names who triggered it; default: the routine.
	UserID string `json:"user_id"`
}

func (s *server) triggerRoutine(w http.ResponseWriter, r *http.Request) {
	var req triggerRequest
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	run, err := s.cfg.Routines.Trigger(r.Context(), r.PathValue("id"), req.Input, req.UserID)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.writeRun(w, r, http.StatusAccepted, run)
}

func (s *server) toggleRoutine(enable bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		set := s.cfg.Routines.Disable
		if enable {
			set = s.cfg.Routines.Enable
		}
		rt, err := set(r.Context(), r.PathValue("id"))
		if err != nil {
			s.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, rt)
	}
}
