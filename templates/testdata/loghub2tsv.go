//go:build ignore

// loghub2tsv converts a loghub structured CSV (…_2k.log_structured.csv, or
// the …_structured_corrected.csv of the corrected labels) into the corpus
// form TestExternalAccuracy reads: "<true template>\t<message>" a line.
//
//	go run templates/testdata/loghub2tsv.go [-label EventId|EventTemplate] IN.csv > OUT.tsv
//
// The label is the column that says which messages share a template. The
// original sets are labelled by EventId; in the corrected ones EventTemplate
// is what was corrected, so use it there.
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	label := flag.String("label", "EventId", "the column that names a message's true template")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: loghub2tsv [-label COLUMN] IN.csv > OUT.tsv")
		os.Exit(2)
	}
	if err := convert(flag.Arg(0), *label, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loghub2tsv:", err)
		os.Exit(1)
	}
}

func convert(path, label string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return err
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimPrefix(h, "\ufeff")] = i
	}
	li, lok := col[label]
	ci, cok := col["Content"]
	if !lok || !cok {
		return fmt.Errorf("%s: no %s or Content column in %q", path, label, head)
	}
	// One line a message: a label never holds a tab or a newline, and the
	// message's own are whitespace to the miner anyway.
	flat := strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		label := flat.Replace(rec[li])
		if strings.HasPrefix(label, "#") {
			label = `\` + label // a line that starts with # is a comment
		}
		if _, err := fmt.Fprintf(w, "%s\t%s\n", label, flat.Replace(rec[ci])); err != nil {
			return err
		}
	}
}
