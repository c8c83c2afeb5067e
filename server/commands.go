package server

import (
	"sort"
	"strings"
	"time"

	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/command"
)

// The edge's own handshake and connection commands (HELLO, AUTH, QUIT,
// RESET, CLIENT's) and CONFIG GET: they change the connection or read
// the server. Their table entries are package command's.

// authenticate returns the user that user/pass open (user nil: the
// default user), counting a failure.
func (s *Server) authenticate(user, pass []byte) *aclUser {
	if user == nil {
		user = []byte("default")
	}
	u := s.acl.authenticate(user, pass)
	if u == nil {
		s.Stats.AuthFailures.Add(1)
		s.warn("auth", "authentication failed", "user", acl.Sanitize(user, 64))
	}
	return u
}

func cmdAuth(s *Server, c *client, args [][]byte) outcome {
	var user, pass []byte
	switch len(args) {
	case 2:
		if s.acl.defaultUser().NoPass() {
			c.rep.error(command.ErrTextNoPassSet)
			return cmdOK
		}
		pass = args[1]
	case 3:
		user, pass = args[1], args[2]
	default:
		c.rep.error(command.ErrSyntax)
		return cmdOK
	}
	u := s.authenticate(user, pass)
	if u == nil {
		c.rep.error(command.ErrWrongPass)
		return cmdOK
	}
	s.setUser(c, u)
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func cmdHello(s *Server, c *client, args [][]byte) outcome {
	proto := 0
	if len(args) >= 2 {
		v, ok := command.ParseInt(args[1])
		if !ok {
			c.rep.error(command.ErrProtoNotInteger)
			return cmdOK
		}
		if v != 2 && v != 3 {
			c.rep.error(command.ErrProtoVersion)
			return cmdOK
		}
		proto = int(v)
	}
	var name []byte
	user := c.user
	for i := 2; i < len(args); i++ {
		switch {
		case command.EqualFold(args[i], "auth") && i+2 < len(args):
			if user = s.authenticate(args[i+1], args[i+2]); user == nil {
				c.rep.error(command.ErrWrongPass)
				return cmdOK
			}
			i += 2
		case command.EqualFold(args[i], "setname") && i+1 < len(args):
			name = args[i+1]
			if !command.ValidClientName(name) {
				c.rep.error(command.ErrClientName)
				return cmdOK
			}
			i++
		default:
			c.rep.error(command.HelloBadOption(args[i]))
			return cmdOK
		}
	}
	if user == nil {
		c.rep.error(command.ErrHelloNoAuth)
		return cmdOK
	}
	if user != c.user {
		s.setUser(c, user)
	}
	if proto != 0 {
		c.setProto(proto)
	}
	if name != nil {
		c.mu.Lock()
		c.name = string(name)
		c.mu.Unlock()
	}
	r := &c.rep
	r.mapHeader(7)
	r.conn.WriteBulkString("server")
	r.conn.WriteBulkString("rlserver")
	// Clients gate features on the Redis version they see here; rlserver's
	// own version is in INFO (rlserver_version).
	r.conn.WriteBulkString("version")
	r.conn.WriteBulkString(redisVersion)
	r.conn.WriteBulkString("proto")
	if r.resp3() {
		r.conn.WriteInt(3)
	} else {
		r.conn.WriteInt(2)
	}
	r.conn.WriteBulkString("id")
	r.conn.WriteInt64(c.id)
	r.conn.WriteBulkString("mode")
	r.conn.WriteBulkString(s.redisMode())
	r.conn.WriteBulkString("role")
	r.conn.WriteBulkString("master")
	r.conn.WriteBulkString("modules")
	r.conn.WriteArray(0)
	return cmdOK
}

func cmdQuitConn(_ *Server, c *client, _ [][]byte) outcome {
	c.rep.conn.WriteString("OK")
	return cmdQuit
}

func cmdReset(s *Server, c *client, _ [][]byte) outcome {
	c.setProto(2)
	s.setUser(c, s.initialUser())
	c.mu.Lock()
	c.name = ""
	c.noEvict = false
	c.mu.Unlock()
	c.resetReplyMode() // client.go
	c.txn.Reset()      // command.Txn
	c.rep.conn.WriteString("RESET")
	return cmdOK
}

// CLIENT

func cmdClientSetName(_ *Server, c *client, args [][]byte) outcome {
	if !command.ValidClientName(args[2]) {
		c.rep.error(command.ErrClientName)
		return cmdOK
	}
	c.mu.Lock()
	c.name = string(args[2])
	c.mu.Unlock()
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func cmdClientGetName(_ *Server, c *client, _ [][]byte) outcome {
	c.mu.Lock()
	name := c.name
	c.mu.Unlock()
	if name == "" {
		c.rep.null()
	} else {
		c.rep.conn.WriteBulkString(name)
	}
	return cmdOK
}

func cmdClientID(_ *Server, c *client, _ [][]byte) outcome {
	c.rep.conn.WriteInt64(c.id)
	return cmdOK
}

func cmdClientSetInfo(_ *Server, c *client, args [][]byte) outcome {
	if !command.ValidClientName(args[3]) {
		c.rep.error(command.BadClientInfo(args[2]))
		return cmdOK
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case command.EqualFold(args[2], "lib-name"):
		c.libName = string(args[3])
	case command.EqualFold(args[2], "lib-ver"):
		c.libVer = string(args[3])
	default:
		c.rep.error(command.UnknownClientInfo(args[2]))
		return cmdOK
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func cmdClientInfo(_ *Server, c *client, args [][]byte) outcome {
	c.rep.verbatim(c.info(time.Now(), args) + "\n")
	return cmdOK
}

// cmdConfigGet: CONFIG GET pattern [pattern ...], the settings whose
// names match, sorted.
func cmdConfigGet(s *Server, c *client, args [][]byte) outcome {
	found := map[string]string{}
	for _, p := range args[2:] {
		pat := strings.ToLower(string(p))
		for k, v := range s.settings() {
			if acl.Glob(pat, k) {
				found[k] = v
			}
		}
	}
	keys := make([]string, 0, len(found))
	for k := range found {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c.rep.mapHeader(len(keys))
	for _, k := range keys {
		c.rep.conn.WriteBulkString(k)
		c.rep.conn.WriteBulkString(found[k])
	}
	return cmdOK
}
