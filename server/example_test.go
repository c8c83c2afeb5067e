package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/standalone"
)

// A server answering RL.ALLOW over net.Pipe, with the standalone backend.
// On the way: Server.Serve runs the connection's read loop (server.go),
// resp.Reader returns the whole pipeline, the command table (table.go)
// finds rl.allow, whose batch function (limiter.go) parses its arguments
// into an engine.Request; at the end of the pipeline the batch step
// (batch.go) hands every request to the backend in one Backend.Do, which
// reads the clock once and calls engine.Engine.Do, then writes the
// replies in order and flushes once.
func Example() {
	eng := engine.New(4)
	defer eng.Close()
	srv := server.New(server.Config{}, standalone.New(eng, nil))

	client, conn := net.Pipe()
	ln := &pipeListener{conn: conn, closed: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()

	// A pipeline of two commands: RL.ALLOW key capacity rate [cost], as a
	// RESP array of bulk strings and as an inline command. Both go to the
	// backend in one batch.
	go client.Write([]byte("*5\r\n$8\r\nRL.ALLOW\r\n$7\r\nuser:42\r\n$2\r\n10\r\n$1\r\n1\r\n$1\r\n3\r\n" +
		"RL.ALLOW user:42 10 1 8\r\n"))
	r := bufio.NewReader(client)
	for range 2 {
		// [allowed, remaining, retry_after_ms, reset_after_ms]: an array
		// header, then four integers.
		reply := ""
		for i := 0; i < 5; i++ {
			line, err := r.ReadString('\n')
			if err != nil {
				panic(err)
			}
			reply += line
		}
		fmt.Printf("%q\n", reply)
	}

	client.Close()
	srv.Shutdown(context.Background())
	fmt.Println("Serve returned", <-done)
	// Output:
	// "*4\r\n:1\r\n:7\r\n:0\r\n:3000\r\n"
	// "*4\r\n:0\r\n:7\r\n:1000\r\n:3000\r\n"
	// Serve returned <nil>
}

// pipeListener hands Serve one connection, then waits until closed.
type pipeListener struct {
	conn   net.Conn
	once   sync.Once
	closed chan struct{}
	given  bool
}

func (l *pipeListener) Accept() (net.Conn, error) {
	if !l.given {
		l.given = true
		return l.conn, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return l.conn.LocalAddr() }
