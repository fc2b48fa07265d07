// Package routine runs routines: standing agent jobs fired by a schedule or
// by a person. The Scheduler fires every due routine once cluster-wide (a
// compare-and-set on the stored next fire time), applies the missed-fire
// policy after downtime, delivers results (webhook, or history only) and
// disables a routine after too many consecutive failures.
package routine

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // timezones work on hosts and images without a zoneinfo database

	"github.com/robfig/cron/v3"
)

// Schedule tells a routine's due times. Build one with ParseSchedule.
//
// Cron expressions are read in the routine's timezone, so daylight saving
// time follows the zone:
//   - Schedules that name hours (`0 9 * * 1-5`, `30 2 * * *`, @daily) follow
//     the wall clock: a time the clocks skip in spring fires at the moment
//     they jump (02:30 in Europe/Berlin fires at 03:00 on the last Sunday of
//     March), and a time that happens twice in autumn fires once, at its
//     first occurrence.
//   - Schedules with every hour (`*/15 * * * *`, @hourly) follow elapsed time:
//     nothing fires in the skipped hour (those times do not exist) and the
//     repeated hour fires again.
//   - `@every <duration>` ignores the timezone: due times are the duration
//     apart, counted from the previous due time.
type Schedule struct {
	spec  string
	loc   *time.Location
	wall  *cron.SpecSchedule // wall-clock cron, evaluated in UTC as local wall time
	clock *cron.SpecSchedule // elapsed-time cron, evaluated in loc
	every time.Duration
}

// ParseSchedule parses a standard 5-field cron expression, a descriptor
// (@yearly, @monthly, @weekly, @daily, @midnight, @hourly) or `@every
// <duration>` (at least 1s), read in the IANA timezone tz ("" = UTC).
func ParseSchedule(spec, tz string) (Schedule, error) {
	spec = strings.TrimSpace(spec)
	if tz == "" {
		tz = "UTC"
	}
	if tz == "Local" {
		// The host's zone: replicas in other zones would fire at other times.
		return Schedule{}, fmt.Errorf("timezone %q: name the zone (e.g. UTC, Europe/Berlin, America/New_York), not the host's", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return Schedule{}, fmt.Errorf("timezone %q: unknown IANA zone (e.g. UTC, Europe/Berlin, America/New_York)", tz)
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return Schedule{}, fmt.Errorf("schedule %q: set the zone with timezone, not a TZ= prefix", spec)
	}
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d < time.Second {
			return Schedule{}, fmt.Errorf("schedule %q: @every needs a duration of at least 1s, like @every 30m", spec)
		}
		return Schedule{spec: spec, loc: loc, every: d.Truncate(time.Second)}, nil
	}
	parsed, err := cron.ParseStandard(spec)
	if err != nil {
		return Schedule{}, fmt.Errorf(`schedule %q: %v (use 5 cron fields like "0 9 * * 1-5", @hourly, @daily or @every 30m)`, spec, err)
	}
	ss, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return Schedule{}, fmt.Errorf("schedule %q: unsupported", spec)
	}
	s := Schedule{spec: spec, loc: loc}
	c := *ss
	const starBit = 1 << 63 // robfig/cron marks a field written as *
	if c.Hour&starBit != 0 {
		c.Location = loc
		s.clock = &c
	} else {
		c.Location = time.UTC
		s.wall = &c
	}
	if s.Next(time.Now()).IsZero() {
		return Schedule{}, fmt.Errorf("schedule %q: never fires (a day no month has, like 30 February)", spec)
	}
	return s, nil
}

// String returns the expression the schedule was parsed from.
func (s Schedule) String() string { return s.spec }

// Next returns the first due time strictly after t, or the zero time when
// there is none (within five years).
func (s Schedule) Next(t time.Time) time.Time {
	switch {
	case s.every > 0:
		return t.Truncate(time.Second).Add(s.every)
	case s.clock != nil:
		return s.clock.Next(t).UTC()
	case s.wall != nil:
		return s.nextWall(t)
	}
	return time.Time{}
}

// nextWall finds the next wall-clock match after t: the cron is evaluated on
// the naive local time (UTC stands in for "no zone"), then placed in the zone.
func (s Schedule) nextWall(t time.Time) time.Time {
	naive := wallOf(t.In(s.loc))
	for range 1000 {
		w := s.wall.Next(naive)
		if w.IsZero() {
			return time.Time{}
		}
		at := s.place(w)
		if at.After(t) {
			return at.UTC()
		}
		naive = w // already passed (a repeated hour): look further
	}
	return time.Time{}
}

// place returns the first instant whose wall clock in s.loc is w, or, when
// the clocks skip w (spring forward), the instant they jump.
func (s Schedule) place(w time.Time) time.Time {
	at := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, s.loc)
	if !wallOf(at).Equal(w) {
		start, _ := at.ZoneBounds() // w falls in a gap: fire when it ends
		return start
	}
	// A repeated wall time (fall back) has two instants; time.Date may pick
	// the later one. Prefer the earlier one if it exists.
	if start, _ := at.ZoneBounds(); !start.IsZero() {
		_, off := start.Add(-time.Nanosecond).Zone()
		earlier := w.Add(-time.Duration(off) * time.Second)
		if earlier.Before(start) && wallOf(earlier.In(s.loc)).Equal(w) {
			return earlier
		}
	}
	return at
}

// wallOf returns t's wall clock as a UTC time (the zone dropped).
func wallOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}
