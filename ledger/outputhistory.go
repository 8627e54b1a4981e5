package ledger

import (
	"context"
	"fmt"
)

// OutputHistoryWindow is how many of a pipeline's latest answered calls
// OutputHistory averages.
const OutputHistoryWindow = 1000

// OutputHistory is the mean output tokens of the latest answered calls
// (status ok, output tokens reported) that pipeline made on model, over at
// most OutputHistoryWindow calls, and how many calls that is (0: no
// history; mean is then 0): the expected answer length of a `--dry-run`.
func OutputHistory(ctx context.Context, db DBTX, pipeline, model string) (calls int, mean float64, err error) {
	err = db.QueryRow(ctx, `SELECT count(*), coalesce(avg(output_tokens), 0)::float8 FROM (
			SELECT a.output_tokens FROM triage_attempt a JOIN triage_batch b ON b.id = a.batch
			WHERE b.pipeline = $1 AND a.model = $2 AND a.status = 'ok' AND a.output_tokens > 0
			ORDER BY a.id DESC LIMIT $3) h`, pipeline, model, OutputHistoryWindow).Scan(&calls, &mean)
	if err != nil {
		return 0, 0, fmt.Errorf("ledger: output history of pipeline %q: %w", pipeline, err)
	}
	return calls, mean, nil
}
