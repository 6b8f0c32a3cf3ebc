package coord

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// calendar is a parsed five-field cron expression: minute hour
// day-of-month month day-of-week, each "*", a number, a range "a-b", a
// step "*/n" or "a-b/n", or a comma list of those. As in cron, when both
// day fields are restricted a day matches either.
//
// Not github.com/robfig/cron/v3 (which the module does not link): compared
// on a table of expressions over ten months in America/New_York, it agrees
// on plain, stepped, listed and DST-crossing schedules, but rejects 7 for
// Sunday ("0 0 * * 7"), reads "1/2" in day-of-week as Mon/Wed/Fri where
// this reads 1-7/2 (Sundays too), and would widen what a schedule may say
// (month and day names, "?", "@daily", "@every").
type calendar struct {
	min, hour, dom, mon, dow [64]bool
	domAny, dowAny           bool
}

func parseCalendar(expr string) (*calendar, error) {
	f := strings.Fields(expr)
	if len(f) != 5 {
		return nil, fmt.Errorf("calendar %q: want 5 fields (minute hour day-of-month month day-of-week), got %d", expr, len(f))
	}
	c := &calendar{domAny: f[2] == "*", dowAny: f[4] == "*"}
	specs := []struct {
		name   string
		set    *[64]bool
		lo, hi int
	}{{"minute", &c.min, 0, 59}, {"hour", &c.hour, 0, 23}, {"day-of-month", &c.dom, 1, 31}, {"month", &c.mon, 1, 12}, {"day-of-week", &c.dow, 0, 7}}
	for i, s := range specs {
		if err := parseField(f[i], s.set, s.lo, s.hi); err != nil {
			return nil, fmt.Errorf("calendar %q: %s field %q: %w", expr, s.name, f[i], err)
		}
	}
	if c.dow[7] {
		c.dow[0] = true // 7 is Sunday too
	}
	return c, nil
}

func parseField(s string, set *[64]bool, lo, hi int) error {
	for _, part := range strings.Split(s, ",") {
		rng, stepS, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepS)
			if err != nil || n < 1 {
				return fmt.Errorf("step %q is not a positive number", stepS)
			}
			step = n
		}
		a, b := lo, hi
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			as, bs, _ := strings.Cut(rng, "-")
			var err1, err2 error
			a, err1 = strconv.Atoi(as)
			b, err2 = strconv.Atoi(bs)
			if err1 != nil || err2 != nil || a > b {
				return fmt.Errorf("range %q is not a-b with a <= b", rng)
			}
		default:
			n, err := strconv.Atoi(rng)
			if err != nil {
				return fmt.Errorf("%q is not a number", rng)
			}
			a, b = n, n
			if hasStep {
				b = hi
			}
		}
		if a < lo || b > hi {
			return fmt.Errorf("%d-%d is outside %d-%d", a, b, lo, hi)
		}
		for v := a; v <= b; v += step {
			set[v] = true
		}
	}
	return nil
}

func (c *calendar) matches(t time.Time) bool {
	if !c.min[t.Minute()] || !c.hour[t.Hour()] || !c.mon[int(t.Month())] {
		return false
	}
	dom, dow := c.dom[t.Day()], c.dow[int(t.Weekday())]
	switch {
	case c.domAny && c.dowAny:
		return true
	case c.domAny:
		return dow
	case c.dowAny:
		return dom
	}
	return dom || dow
}

// maxScan bounds how far due() looks: a calendar that matches nothing
// (e.g. "0 0 31 2 *") must not loop forever.
const maxScan = 366 * 24 * 60 * 5

// due lists the calendar's times in (after, upTo], evaluated in loc,
// returned in UTC. Times are whole minutes of absolute time: a local time
// skipped by a DST change never occurs, a repeated one occurs twice.
func (c *calendar) due(after, upTo time.Time, loc *time.Location) []time.Time {
	var out []time.Time
	t := after.Truncate(time.Minute).Add(time.Minute)
	for i := 0; !t.After(upTo) && i < maxScan; i++ {
		if c.matches(t.In(loc)) {
			out = append(out, t.UTC())
		}
		t = t.Add(time.Minute)
	}
	return out
}
