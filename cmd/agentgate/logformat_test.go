package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestLogFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger("info", "json", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("run step failed", "run", "run_1", "attempt", 2)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "run step failed" || line["run"] != "run_1" || line["level"] != "INFO" {
		t.Fatalf("json log line = %q (%v)", buf.String(), err)
	}

	buf.Reset()
	log, _ = newLogger("info", "text", &buf)
	log.Info("run step failed", "run", "run_1")
	if !strings.Contains(buf.String(), `msg="run step failed" run=run_1`) {
		t.Fatalf("text log line = %q", buf.String())
	}

	_, err = newLogger("info", "xml", &buf)
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "must be text or json") {
		t.Fatalf("newLogger(xml) = %v, want a usage error naming the choices", err)
	}
}
