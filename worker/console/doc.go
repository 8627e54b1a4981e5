// Package console is triage's web window: one HTTP handler that serves
// River UI under /riverui/ and triage's own pages under / — the batches, the
// dead letters with their requeue, and the keys with their resume — read
// live from PostgreSQL.
//
// The pages are server-rendered with html/template and a small stylesheet,
// without JavaScript. Their URLs are a contract (people bookmark them,
// scripts link to them):
//
//	/                                        the batches
//	/batches/{batch}                         one batch
//	/dead-letters?batch=&class=&reason=&unknown=
//	/dead-letters/{id}                       one dead letter
//	/keys                                    the keys' breakers, pauses and spend
//	/riverui/                                River UI
//
// Every page also answers ?format=json with the shape of the matching CLI
// command's --json output, built by the same operator functions. The actions
// (requeue, resume, a batch's pause, resume, budget and cancel) ask for confirmation on a page of their own, are POSTs
// guarded by http.CrossOriginProtection, do exactly what `triage dlq requeue`
// and `triage keys resume` do (operator.Requeue, operator.Resume) and raise
// an alert naming what they did.
//
// Safe by default: Listen refuses a non-loopback address without a token,
// and with a token every request must carry it, as a bearer token or as the
// basic-auth password, compared in constant time.
package console
