package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseMembers reads any -cluster-members value: it never panics, and
// what it accepts is a list of distinct non-zero IDs (a duplicate would
// match a snapshot's membership it is not) that prints back to a value
// read the same.
func FuzzParseMembers(f *testing.F) {
	for _, s := range []string{"1,2,3", " 1 , 2 ", "1", "0", "1,,2", "-1", "18446744073709551616", "1,1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := parseMembers(s)
		if err != nil {
			return
		}
		if len(ids) == 0 || slices.Contains(ids, 0) || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids) {
			t.Fatalf("%q read as %v", s, ids)
		}
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = strconv.FormatUint(uint64(id), 10)
		}
		if again, err := parseMembers(strings.Join(parts, ",")); err != nil || !slices.Equal(again, ids) {
			t.Fatalf("%v printed back read as %v, %v", ids, again, err)
		}
	})
}
