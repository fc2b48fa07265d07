// Package testnet holds network helpers for tests.
package testnet

import (
	"fmt"
	"syscall"
	"testing"
)

// RefusingAddr is a loopback address whose port is bound but not
// listening, for as long as t runs: a connection to it is refused, and no
// other test's server can take the port meanwhile (a listener closed at
// once leaves the port free for the next one, and the "refused" call then
// reaches that server).
func RefusingAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
