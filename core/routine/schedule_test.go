package routine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/core/routine"
)

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04:05", s)
	if err != nil {
		panic(err)
	}
	return t
}

// nexts returns the n due times after from.
func nexts(t *testing.T, spec, tz string, from time.Time, n int) []string {
	t.Helper()
	s, err := routine.ParseSchedule(spec, tz)
	if err != nil {
		t.Fatalf("parse %q in %s: %v", spec, tz, err)
	}
	var out []string
	for range n {
		from = s.Next(from)
		out = append(out, from.UTC().Format("2006-01-02 15:04:05"))
	}
	return out
}

func TestScheduleNext(t *testing.T) {
	cases := []struct {
		name, spec, tz, from string
		want                 []string
	}{
		{"weekdays at nine", "0 9 * * 1-5", "UTC", "2026-01-09 10:00:00", // a Friday
			[]string{"2026-01-12 09:00:00", "2026-01-13 09:00:00"}},
		{"hourly", "@hourly", "UTC", "2026-01-09 10:00:00",
			[]string{"2026-01-09 11:00:00", "2026-01-09 12:00:00"}},
		{"daily", "@daily", "UTC", "2026-01-09 10:00:00",
			[]string{"2026-01-10 00:00:00", "2026-01-11 00:00:00"}},
		{"every 15 minutes", "*/15 * * * *", "UTC", "2026-01-09 10:07:00",
			[]string{"2026-01-09 10:15:00", "2026-01-09 10:30:00"}},
		{"every 30m counts from the previous time", "@every 30m", "Europe/Berlin", "2026-01-09 10:07:30",
			[]string{"2026-01-09 10:37:30", "2026-01-09 11:07:30", "2026-01-09 11:37:30"}},
		{"every 2s", "@every 2s", "UTC", "2026-01-09 10:00:00",
			[]string{"2026-01-09 10:00:02", "2026-01-09 10:00:04"}},
		{"new york winter and summer", "0 9 * * *", "America/New_York", "2026-03-07 12:00:00",
			[]string{"2026-03-07 14:00:00", "2026-03-08 13:00:00"}}, // US DST starts 2026-03-08
		{"default zone is UTC", "0 9 * * *", "", "2026-06-01 00:00:00",
			[]string{"2026-06-01 09:00:00"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := nexts(t, tc.spec, tc.tz, utc(tc.from), len(tc.want))
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("next after %s = %v, want %v", tc.from, got, tc.want)
			}
		})
	}
}

// Europe/Berlin: CET (+1) → CEST (+2) at 02:00 local on 2026-03-29 (01:00
// UTC); back at 03:00 CEST on 2026-10-25 (01:00 UTC).
func TestScheduleFollowsDST(t *testing.T) {
	cases := []struct {
		name, spec, from string
		want             []string
	}{
		{"nine o'clock stays nine local across spring", "0 9 * * *", "2026-03-27 12:00:00",
			[]string{"2026-03-28 08:00:00", "2026-03-29 07:00:00", "2026-03-30 07:00:00"}},
		{"nine o'clock stays nine local across autumn", "0 9 * * *", "2026-10-23 12:00:00",
			[]string{"2026-10-24 07:00:00", "2026-10-25 08:00:00", "2026-10-26 08:00:00"}},
		{"a skipped time fires when the clocks jump", "30 2 * * *", "2026-03-28 12:00:00",
			[]string{"2026-03-29 01:00:00", "2026-03-30 00:30:00"}},
		{"a repeated time fires once, the first time", "30 2 * * *", "2026-10-24 12:00:00",
			[]string{"2026-10-25 00:30:00", "2026-10-26 01:30:00"}},
		{"several skipped times collapse into one", "*/20 2 * * *", "2026-03-28 12:00:00",
			[]string{"2026-03-29 01:00:00", "2026-03-30 00:00:00"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := nexts(t, tc.spec, "Europe/Berlin", utc(tc.from), len(tc.want))
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("next after %s = %v, want %v", tc.from, got, tc.want)
			}
		})
	}
}

// Schedules over every hour follow elapsed time: the short day has 23 hourly
// fires, the long day 25.
func TestHourlyCountsRealHoursAcrossDST(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, tc := range []struct {
		day  time.Time
		want int
	}{
		{time.Date(2026, 3, 29, 0, 0, 0, 0, berlin), 23},
		{time.Date(2026, 10, 25, 0, 0, 0, 0, berlin), 25},
		{time.Date(2026, 6, 1, 0, 0, 0, 0, berlin), 24},
	} {
		s, err := routine.ParseSchedule("@hourly", "Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		end := tc.day.AddDate(0, 0, 1)
		n := 0
		for at := s.Next(tc.day.Add(-time.Second)); at.Before(end); at = s.Next(at) {
			n++
		}
		if n != tc.want {
			t.Errorf("%s: %d hourly fires, want %d", tc.day.Format("2006-01-02"), n, tc.want)
		}
	}
}

func TestParseScheduleErrors(t *testing.T) {
	for _, tc := range []struct{ spec, tz, want string }{
		{"61 * * * *", "UTC", "above maximum"},
		{"0 0 9 * * 1", "UTC", "expected exactly 5 fields"},
		{"@every 500ms", "UTC", "at least 1s"},
		{"@every soon", "UTC", "at least 1s"},
		{"@fortnightly", "UTC", "unrecognized descriptor"},
		{"TZ=UTC 0 9 * * *", "UTC", "set the zone with timezone"},
		{"0 9 * * *", "Mars/Olympus", "unknown IANA zone"},
		{"0 9 * * *", "Local", "name the zone"},
		{"0 0 30 2 *", "UTC", "never fires"},
		{"0 0 31 4,6,9,11 *", "Europe/Berlin", "never fires"},
	} {
		_, err := routine.ParseSchedule(tc.spec, tc.tz)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSchedule(%q, %q) = %v, want an error containing %q", tc.spec, tc.tz, err, tc.want)
		}
	}
}

func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"0 9 * * 1-5", "@every 30m", "@hourly", "*/7 1-5 * jan-mar mon", "30 2 * * *"} {
		f.Add(s)
	}
	from := utc("2026-03-29 00:30:00")
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := routine.ParseSchedule(spec, "Europe/Berlin")
		if err != nil {
			return
		}
		prev := from
		for range 3 {
			next := s.Next(prev)
			if next.IsZero() {
				return
			}
			if !next.After(prev) {
				t.Fatalf("%q: next after %v is %v, not later", spec, prev, next)
			}
			prev = next
		}
	})
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in, kind, dest, err string
	}{
		{"", "none", "", ""},
		{"none", "none", "", ""},
		{"webhook:https://example.com/hook?x=1", "webhook", "https://example.com/hook?x=1", ""},
		{"slack:C0123", "slack", "C0123", ""},
		{"discord:123", "discord", "123", ""},
		{"telegram:-100", "telegram", "-100", ""},
		{"webhook:ftp://x", "", "", "absolute http(s) URL"},
		{"webhook:", "", "", "absolute http(s) URL"},
		{"telegram:", "", "", "name the channel or chat"},
		{"pager:x", "", "", "must be slack:"},
		{"slack", "", "", "must be slack:"},
	} {
		got, err := routine.ParseTarget(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseTarget(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got.Kind != tc.kind || got.Dest != tc.dest {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %s %s", tc.in, got, err, tc.kind, tc.dest)
		}
	}
}
