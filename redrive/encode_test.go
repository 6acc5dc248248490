package redrive

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestAppendStepMatchesEncodingJSON holds the direct encoder to what
// encoding/json writes for the same record.
func TestAppendStepMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	for _, r := range []Record{
		{Type: RecIntent, At: at, RunID: "r1", Seq: 7, ID: "1-0", EventID: "E1", Fingerprint: "sha256:ab", Dest: "orders"},
		{Type: RecPublished, At: at, RunID: "r1", Seq: 7, ID: "1-0", DestID: "2-0"},
		{Type: RecFailed, At: at, RunID: "r\\1", Seq: 1, Note: "quote \" tab \t nl \n ctl \x01 é ☃ <&>"},
		{Type: RecGone, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), RunID: "r1", Note: "bad \xff byte"},
		{Type: RecRemoved, At: at},
		{Type: RecRemoved, Seq: 8}, // not the first of its write: no time
	} {
		got, ok := appendStep(nil, r)
		if !ok {
			t.Fatalf("appendStep refused %+v", r)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(r)
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		json.Unmarshal(want.Bytes(), &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("appendStep:\n%s\nencoding/json:\n%s", got, want.Bytes())
		}
	}
	if _, ok := appendStep(nil, Record{Type: RecRunEnd, Status: StatusCompleted}); ok {
		t.Error("appendStep took a run-end record")
	}
}

// notWrittenByAppendStep are the Record fields that appendStep leaves out
// on purpose, each with why. Every other field must either be written by
// appendStep as encoding/json writes it, or make appendStep hand the record
// to encoding/json (report false).
var notWrittenByAppendStep = map[string]string{
	"MAC": "the chain seals each line after it is encoded (chain.go); AppendAll clears it first",
}

// TestAppendStepLosesNoField fails for a field added to Record that the
// hand-written step writer neither writes nor refuses: such a field would
// be dropped from every step record without a word. Each field in turn is
// set on a step record that appendStep takes; the record must then be
// refused, or written as encoding/json writes it.
func TestAppendStepLosesNoField(t *testing.T) {
	base := Record{Type: RecPublished}
	rt := reflect.TypeFor[Record]()
	for i := range rt.NumField() {
		field := rt.Field(i)
		if field.Name == "Type" {
			continue // every record has one
		}
		t.Run(field.Name, func(t *testing.T) {
			r := base
			v := reflect.ValueOf(&r).Elem().Field(i)
			if !v.IsZero() {
				t.Fatalf("the base record sets %s already", field.Name)
			}
			v.Set(nonZero(t, field.Type))
			got, ok := appendStep(nil, r)
			if !ok {
				return // refused: encoding/json writes it
			}
			want := encodeJSON(t, r)
			if why, left := notWrittenByAppendStep[field.Name]; left {
				if bytes.Equal(normalJSON(t, got), normalJSON(t, want)) {
					t.Errorf("appendStep writes %s, which notWrittenByAppendStep says it leaves out (%s): take it off that list", field.Name, why)
				}
				return
			}
			if !bytes.Equal(normalJSON(t, got), normalJSON(t, want)) {
				t.Errorf("appendStep drops or changes Record.%s: add it to appendStep's fields, to the records it refuses, or (with the reason) to notWrittenByAppendStep\nappendStep:    %s\nencoding/json: %s",
					field.Name, strings.TrimSpace(string(got)), strings.TrimSpace(string(want)))
			}
		})
	}
	for name := range notWrittenByAppendStep {
		if _, ok := rt.FieldByName(name); !ok {
			t.Errorf("notWrittenByAppendStep names %s, which Record does not have", name)
		}
	}
}

// nonZero is a value of type typ that encoding/json writes (not empty,
// not omitted): one element for a slice or map, a zero struct behind a
// pointer.
func nonZero(t *testing.T, typ reflect.Type) reflect.Value {
	t.Helper()
	v := reflect.New(typ).Elem()
	switch typ.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		v.Set(reflect.New(typ.Elem()))
	case reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(typ, 0, 1), nonZero(t, typ.Elem())))
	case reflect.Map:
		v.Set(reflect.MakeMap(typ))
		v.SetMapIndex(nonZero(t, typ.Key()), nonZero(t, typ.Elem()))
	case reflect.Struct:
		if typ == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 12, 0, 0, 5, time.UTC)))
			break
		}
		if typ.NumField() == 0 {
			t.Fatalf("no non-zero value of %s", typ)
		}
		v.Field(0).Set(nonZero(t, typ.Field(0).Type))
	default:
		t.Fatalf("no non-zero value of %s: teach nonZero its kind", typ)
	}
	return v
}

func encodeJSON(t *testing.T, r Record) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// normalJSON re-encodes a JSON object with its keys sorted.
func normalJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return out
}
