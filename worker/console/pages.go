package console

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/operator"
)

// classifyErr maps an error to a status and a message fit to show: the
// caller's mistakes and refusals say what is wrong; anything else is
// "internal error" (its detail may name database internals).
func classifyErr(err error) (int, string) {
	var in *operator.InputError
	var live *operator.LiveJobError
	switch {
	case errors.As(err, &live):
		return http.StatusConflict, live.Error()
	case errors.As(err, &in):
		return http.StatusBadRequest, in.Error()
	case isNotFound(err):
		return http.StatusNotFound, "not found"
	}
	return http.StatusInternalServerError, "internal error (see the server's log)"
}

// --- batches ------------------------------------------------------------------

func (s *Server) batches(w http.ResponseWriter, r *http.Request) {
	if wantsJSON(r) {
		// `triage status --json`: every batch with its activity.
		views, err := operator.ListBatchesNow(r.Context(), s.opts.Pool, operator.ActivityOptions{Schema: s.opts.Schema, Config: s.opts.Config})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, operator.Nows(views))
		return
	}
	views, err := operator.ListBatches(r.Context(), s.opts.Pool)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	running := slices.ContainsFunc(views, func(v operator.BatchView) bool { return v.Status.State == ledger.BatchRunning })
	s.render(w, http.StatusOK, "batches.html", page{Title: "Batches", Nav: "batches", Refresh: s.refresh(running), Data: views})
}

func (s *Server) batch(w http.ResponseWriter, r *http.Request) {
	v, err := operator.GetBatchNow(r.Context(), s.opts.Pool, r.PathValue("batch"),
		operator.ActivityOptions{Schema: s.opts.Schema, Config: s.opts.Config})
	if err != nil {
		var in *operator.InputError
		if errors.As(err, &in) {
			s.notFound(w, r, in.Error())
			return
		}
		s.fail(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, v.Now()) // `triage status B --json`
		return
	}
	night, err := operator.BatchTimeline(r.Context(), s.opts.Pool, v)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := page{Title: "Batch " + v.Status.Batch, Nav: "batches",
		Refresh: s.refresh(v.Status.State == ledger.BatchRunning || v.Status.State == ledger.BatchCancelled),
		Data:    batchPage{BatchView: v, Night: newNightChart(night)}}
	if a, ok := controls[r.URL.Query().Get("done")]; ok {
		p.Notice = "Batch " + v.Status.Batch + " " + a.done
	}
	s.render(w, http.StatusOK, "batch.html", p)
}

// batchPage is the batch page's data: the batch and its night's picture
// (nil before its first call).
type batchPage struct {
	operator.BatchView
	Night *nightChart
}

// control is one of the batch page's actions: what its confirmation asks
// and what the page says once it is done.
type control struct {
	button, question, done string
}

// controls are the batch page's actions, by the last element of their URL.
var controls = map[string]control{
	"pause": {"Pause", "Its jobs stay queued and make no call until it is resumed; calls in flight finish and are recorded. " +
		"This is what `triage batch pause %s` does.", "paused: its jobs stay queued and make no call until resumed."},
	"resume": {"Resume", "Its queued jobs are woken and its calls start again. This is what `triage batch resume %s` does.",
		"resumed: its queue drains again."},
	"cancel": {"Cancel the batch", "Every record not yet completed is cancelled: queued records are dead-lettered " +
		"(reason cancelled), calls in flight finish and are recorded, its provider batches are cancelled and the answers " +
		"they still return are collected and billed once. No call starts after it. This is what `triage batch cancel %s` does; " +
		"`triage dlq requeue --batch %[1]s --reason cancelled` brings the records back.",
		"cancelled: no call starts any more; it settles once the calls in flight are recorded."},
	"budget": {"Set the budget", "This sets the batch's spend cap, as `triage batch budget %s USD` does (0: no cap); " +
		"a batch paused at its cap runs again, at once, when the new cap is above what it spent. It is one transaction.",
		"budget set."},
}

// budgetOf reads the budget form's amount: a finite number of dollars, not
// negative; 0 removes the cap (nil), as `triage batch budget B 0` does.
func budgetOf(raw string) (*float64, error) {
	raw = strings.TrimPrefix(strings.TrimSpace(raw), "$")
	usd, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsNaN(usd) || math.IsInf(usd, 0) || usd < 0 {
		return nil, &operator.InputError{Err: fmt.Errorf("budget %q: want an amount of dollars, 0 or more (0: no cap)", raw)}
	}
	if usd == 0 {
		return nil, nil
	}
	return &usd, nil
}

func (s *Server) confirmControl(w http.ResponseWriter, r *http.Request) {
	batch, action := r.PathValue("batch"), r.PathValue("action")
	a, ok := controls[action]
	if !ok {
		s.notFound(w, r, "no such page")
		return
	}
	v, err := operator.GetBatch(r.Context(), s.opts.Pool, batch)
	if err != nil {
		var in *operator.InputError
		if errors.As(err, &in) {
			s.notFound(w, r, in.Error())
			return
		}
		s.fail(w, r, err)
		return
	}
	back := "/batches/" + url.PathEscape(batch)
	c := confirmPage{Heading: a.button + " batch " + batch + "?", Button: a.button, Action: back + "/" + action, Back: back,
		Question: fmt.Sprintf(a.question, batch)}
	if action == "budget" {
		c.Heading = "Set the budget of batch " + batch + "?"
		in := input{Name: "usd", Label: "Budget (USD)", Hint: fmt.Sprintf("spent so far $%.4f; 0: no cap", v.Batch.SpentUSD)}
		if v.Batch.BudgetUSD != nil {
			in.Value = strconv.FormatFloat(*v.Batch.BudgetUSD, 'f', -1, 64)
		}
		c.Input = &in
	}
	s.render(w, http.StatusOK, "confirm.html", page{Title: a.button + "?", Nav: "batches", Data: c})
}

// control runs a batch page's action, as the matching `triage batch`
// command does (operator.PauseBatch, ResumeBatch, CancelBatch), raising an
// alert naming it.
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	batch, action := r.PathValue("batch"), r.PathValue("action")
	opts := operator.ControlOptions{Alerter: s.opts.Alerter, By: "web", Schema: s.opts.Schema}
	var (
		res any
		err error
	)
	switch action {
	case "pause":
		res, err = operator.PauseBatch(r.Context(), s.opts.Pool, batch, opts)
	case "resume":
		res, err = operator.ResumeBatch(r.Context(), s.opts.Pool, batch, opts)
	case "cancel":
		res, err = operator.CancelBatch(r.Context(), s.opts.Pool, batch, opts)
	case "budget":
		if err = r.ParseForm(); err != nil {
			err = &operator.InputError{Err: err}
			break
		}
		var budget *float64
		if budget, err = budgetOf(r.PostForm.Get("usd")); err != nil {
			break
		}
		var before, after ledger.Batch
		before, after, err = operator.SetBudget(r.Context(), s.opts.Pool, batch, budget, opts)
		res = map[string]any{"before_budget_usd": before.BudgetUSD, "budget_usd": after.BudgetUSD, "spent_usd": after.SpentUSD}
	default:
		s.notFound(w, r, "no such action")
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"batch": batch, "action": action, "result": res})
		return
	}
	http.Redirect(w, r, "/batches/"+url.PathEscape(batch)+"?done="+action, http.StatusSeeOther)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request, msg string) {
	if wantsJSON(r) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": msg})
		return
	}
	s.render(w, http.StatusNotFound, "error.html", page{Title: "Not found", Error: msg})
}

// --- dead letters -------------------------------------------------------------

// deadLettersPage is the dead-letter page's data.
type deadLettersPage struct {
	Filter  operator.DeadLetterFilter
	Unknown bool
	// Suspects counts the suspect dead letters listed.
	Suspects int
	Items    []ledger.DeadLetter
	Groups   []*operator.DeadLetterGroup
	Batches  []string
	Classes  []string
}

func filterOf(q url.Values) operator.DeadLetterFilter {
	return operator.DeadLetterFilter{
		Batch: strings.TrimSpace(q.Get("batch")), Class: strings.TrimSpace(q.Get("class")),
		Reason: strings.TrimSpace(q.Get("reason")), Unknown: isTrue(q.Get("unknown")), Suspect: isTrue(q.Get("suspect")),
	}
}

func isTrue(s string) bool {
	b, err := strconv.ParseBool(s)
	return (err == nil && b) || s == "yes" || s == "on"
}

func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	f := filterOf(q)
	dls, err := operator.ListDeadLetters(ctx, s.opts.Pool, f)
	var in *operator.InputError
	if err != nil && (wantsJSON(r) || !errors.As(err, &in)) {
		s.fail(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, operator.ListItems(dls)) // `triage dlq list --json`
		return
	}
	list, lerr := ledger.ListBatches(ctx, s.opts.Pool)
	if lerr != nil {
		s.fail(w, r, lerr)
		return
	}
	data := deadLettersPage{Filter: f, Unknown: f.Unknown, Items: dls, Groups: operator.GroupDeadLetters(dls)}
	for _, dl := range dls {
		if dl.Suspect != "" {
			data.Suspects++
		}
	}
	for _, b := range list {
		data.Batches = append(data.Batches, b.Batch)
	}
	for c := classify.OK; c <= classify.Ambiguous; c++ {
		data.Classes = append(data.Classes, c.String())
	}
	// No self-reload, even while a batch runs: the page is where records
	// are ticked for a requeue, and a reload clears the ticks (and the
	// filters not yet applied) under the operator.
	p := page{Title: "Dead letters", Nav: "dead-letters", Data: data}
	status := http.StatusOK
	if err != nil {
		p.Error, status = in.Error(), http.StatusBadRequest
	}
	if n := q.Get("requeued"); n != "" {
		noun := "records"
		if n == "1" {
			noun = "record"
		}
		p.Notice = "Requeued " + n + " " + noun + ": running workers pick them up (the batch page shows progress)."
		if sk := q.Get("skipped"); sk != "" && sk != "0" {
			p.Notice += " " + sk + " had been requeued before, not again."
		}
	}
	s.render(w, status, "deadletters.html", p)
}

func (s *Server) deadLetter(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.notFound(w, r, fmt.Sprintf("%q is not a dead letter id", r.PathValue("id")))
		return
	}
	d, err := operator.GetDeadLetter(r.Context(), s.opts.Pool, id)
	if err != nil {
		var in *operator.InputError
		if errors.As(err, &in) {
			s.notFound(w, r, in.Error())
			return
		}
		s.fail(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, d) // `triage dlq show ID --json`
		return
	}
	s.render(w, http.StatusOK, "deadletter.html", page{Title: fmt.Sprintf("Dead letter %d", id), Nav: "dead-letters", Data: d})
}

// confirmPage is the data of a confirmation step.
type confirmPage struct {
	Heading, Question, Button, Action, Back string
	Items                                   []string
	Fields                                  []field
	// Input, if set, is a value the person types before confirming.
	Input *input
}

// input is a confirmation step's text field.
type input struct{ Name, Label, Value, Hint string }

type field struct{ Name, Value string }

// selectionOf reads a requeue selection from a query or a form: id=N
// (repeated), or batch with class and reason.
func selectionOf(v url.Values) (operator.Selection, error) {
	sel := operator.Selection{Batch: strings.TrimSpace(v.Get("batch")), Class: strings.TrimSpace(v.Get("class")),
		Reason: strings.TrimSpace(v.Get("reason")), Suspect: isTrue(v.Get("suspect"))}
	for _, raw := range v["id"] {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id <= 0 {
			return sel, &operator.InputError{Err: fmt.Errorf("%q is not a dead letter id", raw)}
		}
		if !slices.Contains(sel.IDs, id) {
			sel.IDs = append(sel.IDs, id)
		}
	}
	if len(sel.IDs) == 0 && sel.Batch == "" && sel.Class == "" && sel.Reason == "" && !sel.Suspect {
		return sel, &operator.InputError{Err: errors.New("nothing selected: tick the records to requeue, or filter by batch and requeue a group")}
	}
	return sel, sel.Validate()
}

func (s *Server) confirmRequeue(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sel, err := selectionOf(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var dls []ledger.DeadLetter
	if len(sel.IDs) > 0 {
		for _, id := range sel.IDs {
			d, err := operator.GetDeadLetter(ctx, s.opts.Pool, id)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			dls = append(dls, d.DeadLetter)
		}
	} else {
		dls, err = operator.ListDeadLetters(ctx, s.opts.Pool, operator.DeadLetterFilter{Batch: sel.Batch, Class: sel.Class, Reason: sel.Reason, Suspect: sel.Suspect})
		if err != nil {
			s.fail(w, r, err)
			return
		}
	}
	c := confirmPage{Heading: "Requeue dead letters?", Button: "Requeue", Action: "/dead-letters/requeue",
		Back: "/dead-letters?" + query(sel.Batch, sel.Class, sel.Reason).Encode()}
	for _, id := range sel.IDs {
		c.Fields = append(c.Fields, field{"id", strconv.FormatInt(id, 10)})
	}
	for _, f := range []field{{"batch", sel.Batch}, {"class", sel.Class}, {"reason", sel.Reason}} {
		if f.Value != "" {
			c.Fields = append(c.Fields, f)
		}
	}
	if sel.Suspect {
		c.Fields = append(c.Fields, field{"suspect", "1"})
	}
	pending := 0
	for _, d := range dls {
		note := ""
		if d.RequeuedAt != nil {
			note = " (requeued before: skipped)"
		} else {
			pending++
		}
		c.Items = append(c.Items, fmt.Sprintf("dead letter %d: batch %s, record %s, %s / %s%s", d.ID, d.Batch, d.RecordID, d.Class, d.Reason, note))
	}
	c.Question = fmt.Sprintf("This sends %s back to the queue, as `triage dlq requeue %s` does. "+
		"Each is requeued once, with the pipeline as it is configured now; a rejected record whose request has not changed will likely be rejected again.",
		plural(pending, "record", "records"), sel)
	p := page{Title: "Requeue?", Nav: "dead-letters", Data: c}
	if s.opts.Config == nil {
		p.Error = "this console runs without a triage.toml: requeue builds the new jobs from the pipeline's configuration, so start it with --config"
	}
	s.render(w, http.StatusOK, "confirm.html", p)
}

func (s *Server) requeue(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, &operator.InputError{Err: err})
		return
	}
	sel, err := selectionOf(r.PostForm)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.opts.Config == nil {
		s.fail(w, r, &operator.InputError{Err: errors.New("no triage.toml: requeue needs the pipelines' configuration (start the console with --config)")})
		return
	}
	res, err := operator.Requeue(r.Context(), s.opts.Pool, s.opts.Config, sel, operator.RequeueOptions{Alerter: s.opts.Alerter, By: "web"})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"requeued": res.Requeued, "skipped": res.Skipped, "ids": res.IDs,
			"batches": res.Batches, "unchanged": res.Unchanged})
		return
	}
	back := url.Values{"requeued": {strconv.Itoa(res.Requeued)}, "skipped": {strconv.Itoa(res.Skipped)}}
	if len(res.Batches) == 1 {
		back.Set("batch", res.Batches[0])
	}
	http.Redirect(w, r, "/dead-letters?"+back.Encode(), http.StatusSeeOther)
}

// --- keys ---------------------------------------------------------------------

func (s *Server) keys(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	views, err := operator.KeyViews(ctx, s.opts.Pool, s.opts.Config, s.opts.RetryBudget)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, views) // `triage keys --json`
		return
	}
	list, err := ledger.ListBatches(ctx, s.opts.Pool)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	running := slices.ContainsFunc(list, func(st ledger.Status) bool { return st.State != ledger.BatchSettled })
	p := page{Title: "Keys", Nav: "keys", Refresh: s.refresh(running), Data: views}
	if k := r.URL.Query().Get("resumed"); k != "" {
		p.Notice = "Key " + k + " resumed: breaker closed, pause ended; workers resume its queue within a supervisor tick."
	}
	s.render(w, http.StatusOK, "keys.html", p)
}

func (s *Server) confirmResume(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	c := confirmPage{Heading: "Resume key " + key + "?", Button: "Resume", Action: "/keys/" + url.PathEscape(key) + "/resume", Back: "/keys",
		Question: "This closes the key's breaker and ends its pause at once, as `triage keys resume " + key + "` does. " +
			"Do it after a top-up or a fix: if the cause is still there the next call trips the breaker again."}
	s.render(w, http.StatusOK, "confirm.html", page{Title: "Resume?", Nav: "keys", Data: c})
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	res, err := operator.Resume(r.Context(), s.opts.Pool, s.opts.Config, key, operator.ResumeOptions{Alerter: s.opts.Alerter, By: "web"})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"key": key, "was_held": res.WasHeld, "was": res.Was(), "woken_jobs": res.Woken})
		return
	}
	http.Redirect(w, r, "/keys?resumed="+url.QueryEscape(key), http.StatusSeeOther)
}
