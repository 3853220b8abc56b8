// Package mirror owns the mirror Job: building it from a manager Job, its
// lifecycle on the worker, and the translation of the worker's status into a
// manager status that passes every Job status validation rule of the API
// server.
//
// Not built yet: mirrors arrive with the dispatch issue.
package mirror
