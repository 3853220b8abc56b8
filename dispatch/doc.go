// Package dispatch decides placement: pure functions from a manager Job and
// the views of the workers to a decision (which worker, and why the others
// were rejected) and the scheduling directives to inject (KEP-2926). It does
// no I/O, so every rule is covered by table tests.
//
// Not built yet: placement arrives with the dispatch issue.
package dispatch
