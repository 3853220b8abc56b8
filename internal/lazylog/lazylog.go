// Package lazylog makes a zap logger's added context (logr's WithValues,
// WithName) cost nothing until an entry is written with it.
//
// controller-runtime gives every reconcile a logger of its own, with the
// controller, the object and a reconcile ID, and zap encodes those fields
// as soon as they are added: a copy of the encoder and its buffer for each
// reconcile, though reconciles that go well write nothing at the default
// verbosity. That was 5 % of everything the manager allocated while it
// dispatched 100,000 Jobs, and the collector's work grows with it.
package lazylog

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Option is the zap option that defers the encoding of added fields to the
// first entry written with them (zapcore.NewLazyWith), for every logger
// derived from the one it builds.
func Option() zap.Option {
	return zap.WrapCore(func(c zapcore.Core) zapcore.Core { return lazyCore{c} })
}

// lazyCore is a core whose With records the fields and encodes them once,
// when an entry passes the level check; the cores it returns do the same.
type lazyCore struct{ zapcore.Core }

func (c lazyCore) With(fields []zapcore.Field) zapcore.Core {
	return lazyCore{zapcore.NewLazyWith(c.Core, fields)}
}
