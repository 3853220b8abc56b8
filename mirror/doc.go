// Package mirror owns the mirror Job: building it from a manager Job (Build),
// telling a mirror jobferry created from a same-named Job it must never touch
// (IsMirrorOf), and translating the worker's status into a manager status
// that passes every Job status validation rule of the API server (Status).
// Everything here is a pure function; package manager does the I/O.
package mirror
