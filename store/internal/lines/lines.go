// Package lines stores a short list of ids (a routine's callers) in one
// text column, one per line; the ids never hold a newline (routine.Spec
// checks them). Both SQL stores use it.
package lines

import "strings"

// Join is the column value of l.
func Join(l []string) string { return strings.Join(l, "\n") }

// Patch is Join of a patch field; nil leaves the column as it is.
func Patch(l *[]string) *string {
	if l == nil {
		return nil
	}
	s := Join(*l)
	return &s
}

// Split reads a column value written by Join.
func Split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
