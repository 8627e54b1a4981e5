package decide

import (
	"time"

	"github.com/triage-dev/triage/worker/config"
)

// BatchDeadlineNear is the one definition of "the batch's deadline is
// near": a pipeline in mode auto whose batch's deadline (nil: none) is
// within its auto_margin of now. Its records are then called
// synchronously, and its unsent lines taken back.
func BatchDeadlineNear(p *config.Pipeline, deadline *time.Time, now time.Time) bool {
	return p.Mode == config.ModeAuto && deadline != nil && deadline.Sub(now) < p.AutoMargin
}
