//go:build unix

package server

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerClosed reports whether the client closed its side of conn, without
// consuming any byte: a non-blocking MSG_PEEK read returns 0 at end of
// stream, EAGAIN while the connection is open and idle, and > 0 when the
// client already sent more (a pipelined request: still connected).
// Connections that are not sockets (tests' in-memory conns) are never
// reported closed.
func peerClosed(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr := unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case rerr == nil && n == 0:
			closed = true
		case rerr != nil && !errors.Is(rerr, unix.EAGAIN) && !errors.Is(rerr, unix.EINTR):
			closed = true // ECONNRESET and friends
		}
		return true // never wait for readability
	})
	if err != nil {
		return true // the conn itself is closed
	}
	return closed
}
