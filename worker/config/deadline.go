package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Deadline is when a whole batch must be done: a pipeline's deadline, or
// `triage run --deadline`. It is written either as a clock time, "06:00",
// meaning the next 06:00 local time after the batch is enqueued (an
// overnight run started at 22:00 has eight hours, one started at 07:00 has
// twenty-three), or as a duration from enqueue, "8h", "90m" or "1d". The
// zero Deadline is none. Build one with ParseDeadline.
//
// Enqueue turns it into a moment (At) once, when the batch is created, and
// stores that moment with the batch: a fleet of workers in other time zones,
// or a restart after midnight, must not move it.
type Deadline struct {
	after        time.Duration // duration form; 0 in clock form
	hour, minute int           // clock form
	clock        bool
}

// clockRE is "6:00", "06:00", "23:59".
var clockRE = regexp.MustCompile(`^([0-9]{1,2}):([0-9]{2})$`)

var errDeadlineForm = errors.New(`not a clock time like "06:00" (00:00 to 23:59, local time) nor a duration like "8h", "90m" or "1d"`)

// ParseDeadline reads a deadline in either form; "" is the zero Deadline
// (none). The error does not repeat s: callers name the field and the
// value (`deadline "25:00": ...`).
func ParseDeadline(s string) (Deadline, error) {
	if s == "" {
		return Deadline{}, nil
	}
	if m := clockRE.FindStringSubmatch(s); m != nil {
		h, _ := strconv.Atoi(m[1])
		mi, _ := strconv.Atoi(m[2])
		if h > 23 || mi > 59 {
			return Deadline{}, errDeadlineForm
		}
		return Deadline{hour: h, minute: mi, clock: true}, nil
	}
	d, err := parseTTL(s)
	switch {
	case errors.Is(err, errDurationForm):
		return Deadline{}, errDeadlineForm
	case err != nil:
		return Deadline{}, err
	case d <= 0:
		return Deadline{}, errors.New("must be positive")
	}
	return Deadline{after: d}, nil
}

// IsZero reports whether d is no deadline.
func (d Deadline) IsZero() bool { return !d.clock && d.after == 0 }

// At is the moment d names for a batch enqueued at enqueued: enqueued plus
// the duration, or the first time after enqueued that the clock in
// enqueued's location reads hour:minute (today if still ahead, else
// tomorrow). On a daylight-saving change a clock time that does not exist
// that day is normalised the way time.Date does. The zero Deadline has no
// moment: At returns the zero time.
func (d Deadline) At(enqueued time.Time) time.Time {
	switch {
	case d.clock:
		y, m, day := enqueued.Date()
		t := time.Date(y, m, day, d.hour, d.minute, 0, 0, enqueued.Location())
		if !t.After(enqueued) {
			t = time.Date(y, m, day+1, d.hour, d.minute, 0, 0, enqueued.Location())
		}
		return t
	case d.after > 0:
		return enqueued.Add(d.after)
	}
	return time.Time{}
}

// String is the deadline as it would be written: "06:00", "8h0m0s", or ""
// for none.
func (d Deadline) String() string {
	switch {
	case d.clock:
		return fmt.Sprintf("%02d:%02d", d.hour, d.minute)
	case d.after > 0:
		return d.after.String()
	}
	return ""
}

// deadlineOption reads the pipeline's deadline from the file.
func (rp rawPipeline) deadlineOption(p *Pipeline) error {
	d, err := ParseDeadline(rp.Deadline)
	if err != nil {
		return fmt.Errorf("deadline %q: %w", rp.Deadline, err)
	}
	p.Deadline = d
	return nil
}
