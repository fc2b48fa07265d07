package api

import (
	"errors"
	"testing"
)

// A key is repeated only within one object; the same key in sibling or
// nested objects, or in an array's objects, is not.
func TestRepeatedKey(t *testing.T) {
	for body, repeated := range map[string]bool{
		`{"a":1,"b":2}`:                      false,
		`{"a":{"x":1},"b":{"x":2}}`:          false,
		`[{"x":1},{"x":1}]`:                  false,
		`{"a":1,"b":{"a":2}}`:                false,
		`{"a":[1,{"a":1},[{"a":2}]],"b":{}}`: false,
		`{"a":[1,{"a":1}],"A":2}`:            true,
		`{"b":{"x":1,"y":{"z":1},"x":2}}`:    true,
		`{"k":1,"K":2}`:                      true,  // U+212A KELVIN SIGN folds to k
		`not json {"a":1,"a":2}`:             false, // left to the decoder
	} {
		if err := repeatedKey([]byte(body)); errors.Is(err, errRepeatedKey) != repeated {
			t.Errorf("%s: %v, want repeated=%v", body, err, repeated)
		}
	}
}
