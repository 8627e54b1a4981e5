package nightsim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Switches turn on the dimensions that find a fault being fixed elsewhere
// (issue 19's list, by number). A seed drawn with a switched-off dimension
// leaves it out, so the fixed seeds stay green until the fix is merged; turn
// a switch on after the merge, or set NIGHTSIM_ALL=1 to hunt with every
// dimension whatever the switches say.
type Switches struct {
	// FallbackWithBatch: a fallback next to a batch or auto pipeline
	// (faults 1 and 6: the mover moves jobs with open lines).
	FallbackWithBatch bool
	// FallbackExhausted: a fallback next to a primary whose balance runs
	// out (fault 6: the fallback does not serve; seed 3020 of the first
	// soak: the fallback got nothing, 81 of 86 records snoozed_out).
	FallbackExhausted bool
	// RequeueLive: the operator cancels River jobs and requeues their dead
	// letters while lines may be open (fault 2).
	RequeueLive bool
	// PartialCache: the response cache next to streams that accept a
	// partial (fault 3).
	PartialCache bool
	// BatchExhausted: a balance that runs out under a batch or auto
	// pipeline (faults 4 and 10: a stored answer closes the breaker).
	BatchExhausted bool
	// ModeSwitch: a process restarted with the pipeline's mode switched
	// (fault 7).
	ModeSwitch bool
	// BatchMaxAge: jobs dead-lettered by MaxAge while their lines are open
	// (fault 8): a short MaxAge under batch or auto.
	BatchMaxAge bool
	// ClockSkew: a process whose clock is off by minutes (fault 9).
	ClockSkew bool
	// EchoKey: the provider echoes the API key in error bodies and
	// headers (fault 11: batch lines store raw provider text).
	EchoKey bool
}

// Known is what is on by default: every dimension whose fault is fixed on
// the branch this package is built on.
var Known = All

// All turns every dimension on.
var All = Switches{FallbackWithBatch: true, FallbackExhausted: true, RequeueLive: true, PartialCache: true, BatchExhausted: true,
	ModeSwitch: true, BatchMaxAge: true, ClockSkew: true, EchoKey: true}

// Kind is what one event of the fault schedule does.
type Kind string

// Event kinds.
const (
	// Provider weather: each sets or clears one fault of the primary's (or,
	// with Fallback, the fallback's) scenario until the next event says
	// otherwise.
	OutageOn     Kind = "outage_on"  // Action: overloaded or server_error
	OutageOff    Kind = "outage_off" //
	RateOn       Kind = "rate_on"    // Flag: without rate-limit headers
	RateOff      Kind = "rate_off"
	BalanceLow   Kind = "balance_low" // USD: what is left on the account
	TopUp        Kind = "top_up"      // USD added
	FlakyOn      Kind = "flaky_on"    // Action: hang, cut_stream, garbage, stall_stream (P each call)
	FlakyOff     Kind = "flaky_off"
	FallbackDown Kind = "fallback_down" // the fallback's provider overloaded
	FallbackUp   Kind = "fallback_up"

	// Processes and the database.
	Stop    Kind = "stop"    // Proc stopped gracefully (SIGTERM)
	Kill    Kind = "kill"    // Proc killed: SIGKILL for a child process, a cancelled stop in-process
	Start   Kind = "start"   // Proc started again (Mode: the pipeline's mode it starts with)
	DBBlip  Kind = "db_blip" // every connection of the fleet cut, as a database restart does
	Operate Kind = "operate" // Op: what the operator does
)

// Op is an operator's action.
type Op string

// Operator actions, each what a CLI command does.
const (
	OpResume      Op = "resume"       // triage keys resume main
	OpRaiseBudget Op = "raise_budget" // triage batch budget B <more>
	OpCancelBatch Op = "cancel_batch" // triage batch cancel B
	OpRequeue     Op = "requeue"      // triage dlq requeue --batch B
	OpCancelJobs  Op = "cancel_jobs"  // River job cancel of a few jobs (the UI), then later a requeue
)

// Event is one step of the fault schedule, At after the night starts.
type Event struct {
	At     time.Duration
	Kind   Kind
	Proc   int     // Stop, Kill, Start
	Action string  // OutageOn, FlakyOn
	Flag   bool    // RateOn: no headers
	USD    float64 // BalanceLow, TopUp, OpRaiseBudget
	P      float64 // FlakyOn
	Mode   string  // Start: the mode the process runs the pipeline in
	Op     Op      // Operate
}

func (e Event) String() string {
	s := fmt.Sprintf("%6.2fs %s", e.At.Seconds(), e.Kind)
	switch e.Kind {
	case OutageOn:
		s += " " + e.Action
	case RateOn:
		if e.Flag {
			s += " (no headers)"
		}
	case BalanceLow, TopUp:
		s += fmt.Sprintf(" $%.5f", e.USD)
	case FlakyOn:
		s += fmt.Sprintf(" %s p=%.2f", e.Action, e.P)
	case Stop, Kill:
		s += fmt.Sprintf(" p%d", e.Proc)
	case Start:
		s += fmt.Sprintf(" p%d mode=%s", e.Proc, e.Mode)
	case Operate:
		s += " " + string(e.Op)
		if e.Op == OpRaiseBudget {
			s += fmt.Sprintf(" +$%.4f", e.USD)
		}
	}
	return s
}

// Night is one seed's configuration and fault schedule: everything the
// simulator does is drawn here, so the same seed replays the same night.
type Night struct {
	Seed int64
	// Procs is how many worker processes share the database; Child is the
	// index of one run as a child process (SIGKILL), -1 for none.
	Procs int
	Child int
	// Skew is added to the clock of process 0 (a host clock off by minutes).
	Skew time.Duration

	Vendor      string // the primary key's vendor: openai or anthropic
	Mode        string // sync, batch or auto
	Output      string // json or text
	Concurrency int
	Cache       bool
	Stream      bool
	// AcceptPartial is accept_partial_min_chars (text output with streams).
	AcceptPartial int
	Overflow      string  // on_overflow: dead_letter or truncate
	BudgetUSD     float64 // the pipeline's budget_usd; 0 none
	// Fallback is the fallback model's vendor on its own key ("" none).
	Fallback string
	// EchoKey makes the provider echo the API key in its errors.
	EchoKey bool
	// MaxAge is the worker's MaxAge (how long a job may wait in all).
	MaxAge time.Duration

	Records int
	// Latency of every call, so that calls are in flight when faults
	// come and the work spans the night.
	Latency time.Duration
	// PoisonEvery: every Nth record is rejected (invalid_param); LongEvery:
	// every Nth is over the context window.
	PoisonEvery, LongEvery int
	// BatchLatency is how long the fake's provider batches take; a share
	// (ExpireShare) of each batch's lines expires instead.
	BatchLatency time.Duration
	ExpireShare  float64

	// Length is when the faults end: every fault is cleared then (a
	// balance left out of money stays so when NoTopUp), and every stopped
	// process is started again.
	Length  time.Duration
	NoTopUp bool
	Events  []Event
}

// Plan draws seed's night with the given switches.
func Plan(seed int64, sw Switches) Night {
	r := rand.New(rand.NewPCG(uint64(seed), 0x6e696768747369)) // "nightsi"
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	chance := func(p float64) bool { return r.Float64() < p }
	n := Night{Seed: seed, Child: -1}
	n.Procs = 1 + r.IntN(3)
	n.Vendor = pick("openai", "anthropic")
	n.Mode = pick("sync", "sync", "batch", "auto")
	n.Output = pick("json", "json", "text")
	n.Concurrency = 2 + r.IntN(4)
	n.Cache = chance(0.4)
	n.Stream = n.Mode == "sync" && chance(0.5) // a Batch API answers each line whole
	if n.Stream && n.Output == "text" && chance(0.6) {
		n.AcceptPartial = 5
	}
	if n.AcceptPartial > 0 && n.Cache && !sw.PartialCache {
		n.Cache = false
	}
	n.Overflow = pick("dead_letter", "truncate")
	if chance(0.3) {
		n.BudgetUSD = 0.002 + float64(r.IntN(8))*0.001
	}
	if chance(0.4) {
		n.Fallback = pick("openai", "anthropic")
		if n.Mode != "sync" && !sw.FallbackWithBatch {
			n.Fallback = ""
		}
	}
	n.EchoKey = sw.EchoKey && chance(0.5)
	n.MaxAge = 12 * time.Second // parked jobs (a spent balance, a cap) end as snoozed_out
	if n.Mode != "sync" {
		n.MaxAge = 40 * time.Second
	}
	if n.Mode != "sync" && sw.BatchMaxAge && chance(0.3) {
		n.MaxAge = 6 * time.Second
	}
	if n.Procs > 1 && chance(0.5) {
		n.Child = r.IntN(n.Procs)
	}
	if sw.ClockSkew && chance(0.25) {
		n.Skew = time.Duration(1+r.IntN(10)) * time.Minute
		if chance(0.5) {
			n.Skew = -n.Skew
		}
	}
	n.Records = 60 + r.IntN(140)
	n.Latency = time.Duration(20+r.IntN(60)) * time.Millisecond
	n.PoisonEvery = 7 + r.IntN(10)
	if chance(0.5) {
		n.LongEvery = 11 + r.IntN(10)
	}
	n.BatchLatency = time.Duration(300+r.IntN(3000)) * time.Millisecond
	if n.Mode != "sync" && chance(0.4) {
		n.ExpireShare = 0.1 + 0.3*r.Float64()
	}
	n.Length = time.Duration(2000+r.IntN(3000)) * time.Millisecond

	at := func() time.Duration { return time.Duration(r.Int64N(int64(n.Length))) }
	add := func(e Event) { n.Events = append(n.Events, e) }
	// Windows: a fault switched on and, most of the time, off again.
	window := func(on, off Event) {
		on.At = at()
		add(on)
		if chance(0.8) {
			off.At = on.At + time.Duration(r.Int64N(int64(n.Length-on.At)+1))
			add(off)
		}
	}
	if chance(0.6) {
		window(Event{Kind: OutageOn, Action: pick("overloaded", "server_error")}, Event{Kind: OutageOff})
	}
	if chance(0.5) {
		window(Event{Kind: RateOn, Flag: chance(0.5)}, Event{Kind: RateOff})
	}
	balance := chance(0.4) && (n.Mode == "sync" || sw.BatchExhausted) && (n.Fallback == "" || sw.FallbackExhausted)
	if balance {
		add(Event{At: at(), Kind: BalanceLow, USD: float64(r.IntN(4)) * 0.00005})
		if chance(0.7) {
			add(Event{At: at(), Kind: TopUp, USD: 1})
		} else {
			n.NoTopUp = true
		}
	}
	if chance(0.6) {
		act := pick("hang", "cut_stream", "garbage")
		if n.Stream {
			act = pick(act, "stall_stream", "cut_stream")
		}
		window(Event{Kind: FlakyOn, Action: act, P: 0.05 + 0.15*r.Float64()}, Event{Kind: FlakyOff})
	}
	if n.Fallback != "" && chance(0.4) {
		window(Event{Kind: FallbackDown}, Event{Kind: FallbackUp})
	}
	// Processes: one may be stopped or killed and started again, with
	// the pipeline's mode switched when that dimension is on.
	if chance(0.5) {
		p := r.IntN(n.Procs)
		kind := Stop
		if chance(0.5) {
			kind = Kill
		}
		e := Event{At: at(), Kind: kind, Proc: p}
		add(e)
		mode := n.Mode
		if sw.ModeSwitch && chance(0.5) && !n.Stream && (n.Fallback == "" || sw.FallbackWithBatch) {
			mode = pick("sync", "batch", "auto")
		}
		add(Event{At: e.At + time.Duration(r.Int64N(int64(n.Length-e.At)+1)), Kind: Start, Proc: p, Mode: mode})
	}
	if chance(0.25) {
		add(Event{At: at(), Kind: DBBlip})
	}
	// The operator.
	ops := []Op{OpResume, OpRequeue}
	if n.BudgetUSD > 0 {
		ops = append(ops, OpRaiseBudget)
	}
	if n.Mode != "sync" {
		ops = append(ops, OpCancelBatch)
	}
	if sw.RequeueLive || n.Mode == "sync" {
		ops = append(ops, OpCancelJobs)
	}
	for range r.IntN(4) {
		op := ops[r.IntN(len(ops))]
		e := Event{At: at(), Kind: Operate, Op: op}
		if op == OpRaiseBudget {
			e.USD = 0.002 + float64(r.IntN(5))*0.002
		}
		add(e)
		if op == OpCancelJobs {
			// What the cancel help suggests next: requeue what was cancelled.
			add(Event{At: min(n.Length, e.At+time.Duration(500+r.IntN(2000))*time.Millisecond), Kind: Operate, Op: OpRequeue})
		}
	}
	slices.SortStableFunc(n.Events, func(a, b Event) int { return int(a.At - b.At) })
	return n
}

// String is the night as a test prints it: the replay line first.
func (n Night) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "night %d (replay: go test ./worker/nightsim -run 'TestNight$' -seed=%d)\n", n.Seed, n.Seed)
	fmt.Fprintf(&b, "  procs=%d child=%d skew=%s vendor=%s mode=%s output=%s concurrency=%d cache=%t stream=%t accept_partial=%d\n",
		n.Procs, n.Child, n.Skew, n.Vendor, n.Mode, n.Output, n.Concurrency, n.Cache, n.Stream, n.AcceptPartial)
	fmt.Fprintf(&b, "  on_overflow=%s budget=$%.4f fallback=%q echo_key=%t max_age=%s records=%d latency=%s poison_every=%d long_every=%d batch_latency=%s expire_share=%.2f length=%s no_top_up=%t\n",
		n.Overflow, n.BudgetUSD, n.Fallback, n.EchoKey, n.MaxAge, n.Records, n.Latency, n.PoisonEvery, n.LongEvery, n.BatchLatency, n.ExpireShare, n.Length, n.NoTopUp)
	for _, e := range n.Events {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}
