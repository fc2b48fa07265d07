package api

import (
	"context"
	"errors"
	"net/http"

	approval "github.com/agentgate/agentgate/approvals"
	"github.com/agentgate/agentgate/core"
)

// Routines is the routine service the API exposes (*routine.Scheduler).
type Routines interface {
	List(ctx context.Context, f core.RoutineFilter) (core.Page[core.Routine], error)
	Get(ctx context.Context, id string) (core.Routine, error)
	History(ctx context.Context, id string, o core.ListOptions) (core.Page[core.RoutineEntry], error)
	// TriggerIn fires the routine now with extra appended to its input
	// (approval.Service.Trigger checks the caller first).
	TriggerIn(ctx context.Context, m core.ManualFire) (core.Run, error)
	Enable(ctx context.Context, id string) (core.Routine, error)
	Disable(ctx context.Context, id string) (core.Routine, error)
	// Create stores a routine with source api: *core.InputError when the
	// definition is wrong, core.ErrRoutineExists when the id is taken.
	Create(ctx context.Context, id string, spec core.RoutineSpec) (core.Routine, error)
	// Update changes the fields set in spec: *core.InputError when the
	// result is wrong.
	Update(ctx context.Context, id string, spec core.RoutineSpec) (core.Routine, error)
	// Delete deletes a routine made through the API (its history stays):
	// core.ErrConfigRoutine for one the config file defines.
	Delete(ctx context.Context, id string) error
}

// routineRoutes registers the routine routes on mux.
func (s *server) routineRoutes(mux *http.ServeMux) {
	viewer, operator, admin := approval.RoleViewer, approval.RoleOperator, approval.RoleAdmin
	mux.HandleFunc("GET /api/v1/routines", s.need(viewer, s.listRoutines))
	mux.HandleFunc("POST /api/v1/routines", s.need(admin, s.createRoutine))
	mux.HandleFunc("GET /api/v1/routines/{id}", s.need(viewer, s.getRoutine))
	mux.HandleFunc("PATCH /api/v1/routines/{id}", s.need(admin, s.updateRoutine))
	mux.HandleFunc("DELETE /api/v1/routines/{id}", s.need(admin, s.deleteRoutine))
	mux.HandleFunc("GET /api/v1/routines/{id}/runs", s.need(viewer, s.routineHistory))
	mux.HandleFunc("POST /api/v1/routines/{id}/trigger", s.need(operator, s.triggerRoutine))
	mux.HandleFunc("POST /api/v1/routines/{id}/enable", s.need(admin, s.toggleRoutine(true)))
	mux.HandleFunc("POST /api/v1/routines/{id}/disable", s.need(admin, s.toggleRoutine(false)))
}

func (s *server) listRoutines(w http.ResponseWriter, r *http.Request) {
	opts, ok := listOptions(w, r)
	if !ok {
		return
	}
	page, err := s.cfg.Routines.List(r.Context(), core.RoutineFilter{AgentIDs: caller(r).Agents, ListOptions: opts})
	if err != nil {
		s.fail(w, err)
		return
	}
	RedactFor(caller(r), page.Items)
	writeJSON(w, http.StatusOK, nonNil(page))
}

// RoutineFor is rt as p may see it: in full by admins, Redacted by the
// rest (a webhook's URL can hold its secret). REST and MCP show routines
// through it.
func RoutineFor(p approval.Principal, rt core.Routine) core.Routine {
	if p.Role < approval.RoleAdmin {
		return rt.Redacted()
	}
	return rt
}

// RedactFor replaces each of rs with RoutineFor(p, it).
func RedactFor(p approval.Principal, rs []core.Routine) {
	for i := range rs {
		rs[i] = RoutineFor(p, rs[i])
	}
}

func (s *server) getRoutine(w http.ResponseWriter, r *http.Request) {
	rt, ok := s.loadRoutine(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, RoutineFor(caller(r), rt))
}

// loadRoutine reads the routine of the path for a caller who may use its agent.
func (s *server) loadRoutine(w http.ResponseWriter, r *http.Request) (core.Routine, bool) {
	rt, err := s.cfg.Routines.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return rt, false
	}
	return rt, s.agentAllowed(w, r, rt.AgentID)
}

// specAllowed answers 403 when spec names an agent the caller's key is
// limited away from: a key limited to some agents makes and moves routines
// only among them.
func (s *server) specAllowed(w http.ResponseWriter, r *http.Request, spec core.RoutineSpec) bool {
	return spec.Agent == nil || s.agentAllowed(w, r, *spec.Agent)
}

// auditRoutine records a change or trigger of routine id by the caller.
func (s *server) auditRoutine(r *http.Request, action, id, detail string) {
	p := caller(r)
	s.audit(r.Context(), core.AuditEntry{Principal: p.ID, Route: p.Route, Action: action, Target: id, Detail: detail})
}

func (s *server) routineHistory(w http.ResponseWriter, r *http.Request) {
	opts, ok := listOptions(w, r)
	if !ok {
		return
	}
	if _, ok := s.loadRoutine(w, r); !ok {
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
	// UserID is accepted for older clients and ignored: who triggered the
	// run is the key.
	UserID string `json:"user_id"`
}

func (s *server) triggerRoutine(w http.ResponseWriter, r *http.Request) {
	var req triggerRequest
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	idem, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	id, dedupe := r.PathValue("id"), ""
	if idem != "" { // a retried trigger answers with the run the first one started
		dedupe = TriggerDedupeKey(caller(r).ID, id, idem)
	}
	run, err := s.cfg.Approvals.Trigger(r.Context(), s.cfg.Routines, caller(r), id, req.Input, core.Binding{}, dedupe)
	replayed, err := core.Replayed(run, err) // a retry: the first request's run
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if nc, ok := errors.AsType[*approval.NotCallerError](err); ok {
		writeError(w, http.StatusForbidden, "forbidden", nc.Error())
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	s.writeRun(w, r, http.StatusAccepted, run)
}

func (s *server) toggleRoutine(enable bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.loadRoutine(w, r); !ok {
			return
		}
		set := s.cfg.Routines.Disable
		if enable {
			set = s.cfg.Routines.Enable
		}
		rt, err := set(r.Context(), r.PathValue("id"))
		if err != nil {
			s.fail(w, err)
			return
		}
		action := core.AuditRoutineOff
		if enable {
			action = core.AuditRoutineEnable
		}
		s.auditRoutine(r, action, rt.ID, "")
		writeJSON(w, http.StatusOK, rt)
	}
}

// failRoutine writes err, with the routine conflicts as 409.
func (s *server) failRoutine(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, core.ErrRoutineExists):
		writeError(w, http.StatusConflict, "routine_exists", err.Error())
	case errors.Is(err, core.ErrConfigRoutine):
		writeError(w, http.StatusConflict, "routine_in_config", err.Error())
	default:
		s.fail(w, err)
	}
}

// createRoutineRequest is a routine's id and its fields, named as in the
// config file.
type createRoutineRequest struct {
	ID string `json:"id"`
	core.RoutineSpec
}

func (s *server) createRoutine(w http.ResponseWriter, r *http.Request) {
	var req createRoutineRequest
	if !decode(w, r, &req) || !s.specAllowed(w, r, req.RoutineSpec) {
		return
	}
	req.RoutineSpec.By = caller(r).ID
	rt, err := s.cfg.Routines.Create(r.Context(), req.ID, req.RoutineSpec)
	if err != nil {
		s.failRoutine(w, err)
		return
	}
	s.auditRoutine(r, core.AuditRoutineCreate, rt.ID, "deliver_to "+rt.DeliverTo)
	w.Header().Set("Location", "/api/v1/routines/"+rt.ID)
	writeJSON(w, http.StatusCreated, rt)
}

func (s *server) updateRoutine(w http.ResponseWriter, r *http.Request) {
	var req core.RoutineSpec
	if !decode(w, r, &req) {
		return
	}
	if _, ok := s.loadRoutine(w, r); !ok || !s.specAllowed(w, r, req) {
		return
	}
	req.By = caller(r).ID
	rt, err := s.cfg.Routines.Update(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.failRoutine(w, err)
		return
	}
	s.auditRoutine(r, core.AuditRoutineUpdate, rt.ID, "")
	writeJSON(w, http.StatusOK, rt)
}

func (s *server) deleteRoutine(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.loadRoutine(w, r); !ok {
		return
	}
	if err := s.cfg.Routines.Delete(r.Context(), r.PathValue("id")); err != nil {
		s.failRoutine(w, err)
		return
	}
	s.auditRoutine(r, core.AuditRoutineDelete, r.PathValue("id"), "")
	w.WriteHeader(http.StatusNoContent)
}
