package enqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/enqueue"
)

// Enqueueing from a Go program: the batch, its records and one River job
// per record in one transaction, as `triage enqueue` does. Any `triage
// work` process on the same database works it.
func ExampleBatch() {
	ctx := context.Background()
	pool, done := exampleDatabase() // a *pgxpool.Pool on a migrated database (`triage migrate`)
	defer done()
	cfg, err := config.Load("../config/testdata/triage.toml") // your triage.toml
	if err != nil {
		panic(err)
	}

	recs := []ledger.Record{
		{ID: "c1", Line: 1, Data: json.RawMessage(`{"id":"c1","company":"Acme Tools","country":"DE"}`)},
		{ID: "c2", Line: 2, Data: json.RawMessage(`{"id":"c2","company":"Blue Foods","country":"FR"}`)},
	}
	err = enqueue.Batch(ctx, pool, "", cfg, enqueue.Params{Pipeline: "enrich", Batch: "crm-2026-12-01", Records: recs})
	if err != nil {
		panic(err)
	}
	st, err := ledger.BatchStatus(ctx, pool, "crm-2026-12-01")
	if err != nil {
		panic(err)
	}
	fmt.Printf("batch %s: %d records, %d pending, %s\n", st.Batch, st.Total, st.Pending, st.State)

	// A JSONL stream (a file, an HTTP body) goes through JSONL,
	// in bounded memory; a second batch with the same id is refused.
	_, err = enqueue.JSONL(ctx, pool, "", cfg, enqueue.Params{Pipeline: "enrich", Batch: "crm-2026-12-01"},
		strings.NewReader(`{"id":"c3","company":"Coastal Studios"}`+"\n"))
	fmt.Println(errors.Is(err, ledger.ErrBatchExists))
	// Output:
	// batch crm-2026-12-01: 2 records, 2 pending, running
	// true
}

// exampleDatabase is a fresh migrated schema on the test database (see
// ledger/dbtest) for the example, dropped by done.
func exampleDatabase() (*pgxpool.Pool, func()) {
	tb := &exampleTB{}
	db := dbtest.New(tb)
	return db.Pool, tb.done
}

// exampleTB is the part of testing.TB that dbtest uses, for an example
// (which has no *testing.T).
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (e *exampleTB) Helper()                   {}
func (e *exampleTB) Logf(string, ...any)       {}
func (e *exampleTB) Cleanup(f func())          { e.cleanups = append(e.cleanups, f) }
func (e *exampleTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func (e *exampleTB) done() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}
