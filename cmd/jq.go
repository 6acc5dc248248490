package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/itchyny/gojq"

	"github.com/dlqctl/dlqctl/report"
)

// jqFilter is a compiled --jq expression and the output it filters. The
// command writes its JSON documents into buf; once it returns, every
// document (one for -o json, one a line for -o ndjson) goes through the
// expression, as gh's --jq does: a string result prints raw, anything else
// as compact JSON, one result a line.
type jqFilter struct {
	code *gojq.Code
	expr string
	out  io.Writer
	buf  bytes.Buffer
}

// compileJQ checks EXPR before anything runs, so that a typo is a usage
// error rather than a half-done command.
func compileJQ(expr string, out io.Writer) (*jqFilter, error) {
	q, err := gojq.Parse(expr)
	if err != nil {
		return nil, usageErrorf("--jq %q: %v", expr, err)
	}
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return nil, usageErrorf("--jq %q: %v", expr, err)
	}
	return &jqFilter{code: code, expr: expr, out: out}, nil
}

// flush runs the expression over what the command wrote.
func (j *jqFilter) flush(ctx context.Context) error {
	dec := json.NewDecoder(&j.buf)
	dec.UseNumber()
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("--jq: the command's output is not JSON: %w", err)
		}
		iter := j.code.RunWithContext(ctx, normalizeNumbers(doc))
		for {
			v, ok := iter.Next()
			if !ok {
				break
			}
			if err, ok := v.(error); ok {
				var halt *gojq.HaltError
				if errors.As(err, &halt) && halt.Value() == nil {
					break
				}
				return fmt.Errorf("--jq %q: %w", j.expr, err)
			}
			if err := writeJQResult(j.out, v); err != nil {
				return err
			}
		}
	}
}

func writeJQResult(w io.Writer, v any) error {
	if s, ok := v.(string); ok {
		_, err := fmt.Fprintln(w, s)
		return err
	}
	return report.WriteNDJSON(w, v)
}

// normalizeNumbers turns json.Number into the int or float64 gojq works on;
// decoding with UseNumber keeps large integers (sizes, offsets) exact.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return int(i)
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, c := range x {
			x[k] = normalizeNumbers(c)
		}
	case []any:
		for i, c := range x {
			x[i] = normalizeNumbers(c)
		}
	}
	return v
}
