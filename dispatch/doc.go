// Package dispatch decides placement: pure functions from a manager Job and
// the views of the workers to a Decision (which worker and pool, and why every
// other worker was rejected), and the merge of a worker's scheduling
// directives into a pod template (KEP-2926). It does no I/O, so every rule is
// covered by table tests; package manager feeds it and acts on its answers.
package dispatch
