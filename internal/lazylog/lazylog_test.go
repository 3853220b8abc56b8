package lazylog

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// countingEncoder counts the encoder copies a With makes: zap's eager With
// clones the encoder to add the fields to it.
type countingEncoder struct {
	zapcore.Encoder
	clones *int
}

func (e countingEncoder) Clone() zapcore.Encoder {
	*e.clones++
	return countingEncoder{e.Encoder.Clone(), e.clones}
}

func TestFieldsAreEncodedOnlyWhenAnEntryIsWritten(t *testing.T) {
	var out bytes.Buffer
	clones := 0
	enc := countingEncoder{zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), &clones}
	core := zapcore.NewCore(enc, zapcore.AddSync(&out), zapcore.InfoLevel)
	log := zap.New(core, Option())

	reconcile := log.With(zap.String("controller", "job")).With(zap.String("reconcileID", "r-1"))
	reconcile.Debug("below the level")
	if clones != 0 || out.Len() != 0 {
		t.Fatalf("adding fields and a filtered entry cloned the encoder %d times and wrote %q; want nothing done", clones, out.String())
	}
	reconcile.Info("dispatched", zap.String("worker", "worker-1"))
	line := out.String()
	for _, want := range []string{`"controller":"job"`, `"reconcileID":"r-1"`, `"worker":"worker-1"`, `"msg":"dispatched"`} {
		if !strings.Contains(line, want) {
			t.Errorf("the entry %q lacks %s", line, want)
		}
	}
	if i, j := strings.Index(line, `"controller"`), strings.Index(line, `"reconcileID"`); i < 0 || j < i {
		t.Errorf("the fields are out of the order they were added in: %q", line)
	}
	if clones == 0 {
		t.Error("the entry was written without encoding the added fields")
	}
}
