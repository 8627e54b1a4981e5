// Package nightsim draws the nights of the night simulator: a seeded
// configuration (processes, mode, vendors, fallback, cache, streams,
// on_overflow, a spend cap) and a fault schedule (outages, rate limits, a
// balance that runs out, flaky calls, processes stopped or killed, a
// database blip, an operator at random moments). Plan is pure: the same
// seed and switches give the same Night.
//
// The simulator itself is this package's test (TestNight): it plays a
// Night against the fake provider and PostgreSQL, lets the fleet settle
// once the faults end, and checks what a user cares about. See
// docs/night-simulator.md.
package nightsim
