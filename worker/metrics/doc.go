// Package metrics exposes a triage worker process to Prometheus.
//
// A Metrics is a worker.Observer: pass it as worker.Options.Observer and it
// counts every provider call the process makes. At scrape time it also reads
// the shared key state (breaker and pause, from keys.Store) and, from the
// ledger, the spend per key, the budgets and pauses of unsettled batches and
// each key's retry budget, so those gauges are the same on every process of
// the fleet, while the counters are this process's own since it started.
//
// Handler serves
//
//	/metrics   Prometheus text exposition (this Metrics' own registry, plus
//	           the Go runtime and process collectors)
//	/healthz   200 "ok" when the database answers a ping within
//	           HealthTimeoutDefault, else 503 and a one-line reason
//
// Nothing it serves is authenticated: bind it to loopback or a private
// network. Choosing the address, and defaulting it to loopback, is the
// caller's job (`triage work --metrics-addr`). River's web UI is not embedded: riverqueue.com/riverui
// v0.22.0 requires River v0.49 with its SQLite driver and would move shared
// dependencies to other versions.
//
// Metrics:
//
//	triage_calls_total{key,class,status}      counter: calls by classifier class and HTTP status ("0": no status line)
//	triage_retries_total{key,class}           counter: calls that were not the record's first
//	triage_unknown_errors_total{key}          counter: calls no classifier rule matched
//	triage_spend_usd_total{key}               counter: billed cost of this process's calls
//	triage_call_duration_seconds{key,class}   histogram: call latency
//	triage_breaker_state{key}                 gauge: 0 closed, 1 half_open, 2 open (fleet-wide)
//	triage_key_paused{key}                    gauge: 1 when an operator or throttle pause is active (fleet-wide)
//	triage_key_spend_usd{key}                 gauge: spend recorded in the ledger (fleet-wide)
//	triage_batch_budget_usd{batch}            gauge: spend cap of an unsettled batch that has one (fleet-wide)
//	triage_batch_spend_usd{batch}             gauge: billed spend of the same batches, what the cap is checked against (fleet-wide)
//	triage_batch_paused{batch,reason}         gauge: 1 for an unsettled batch in paused_budget or paused_exhausted (fleet-wide)
//	triage_retry_budget_open{key}             gauge: retries not yet succeeded over the retry window (fleet-wide)
//	triage_retry_budget_allowed{key}          gauge: max(floor, retry_budget x first calls) over the window (fleet-wide);
//	                                          reported for the keys of Options.RetryBudgets
//	triage_shared_state_up                    gauge: 1 when the last scrape read the gauges above
package metrics
