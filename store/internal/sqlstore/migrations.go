package sqlstore

import (
	"io/fs"
	"strconv"
	"strings"
)

// LatestMigration is the highest NNNN_ prefix of the files in dir: the
// newest migration a build carries.
func LatestMigration(fsys fs.FS, dir string) int {
	entries, _ := fs.ReadDir(fsys, dir)
	v := 0
	for _, e := range entries {
		prefix, _, _ := strings.Cut(e.Name(), "_")
		if n, err := strconv.Atoi(prefix); err == nil && n > v {
			v = n
		}
	}
	return v
}
