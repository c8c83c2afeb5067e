package script

import (
	"encoding/binary"
	"math"

	lua "github.com/yuin/gopher-lua"
)

// cmsgpack is Redis's lua_cmsgpack 0.4: integral numbers as the smallest
// integer encoding, others as float 32 when exact, else float 64; tables
// with keys 1..n as arrays, others as maps; tables nested past 16 levels
// as nil.

func openCmsgpack(L *lua.LState, lim *limits) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("pack", L.NewFunction(func(L *lua.LState) int { return mpPack(L, lim) }))
	t.RawSetString("unpack", L.NewFunction(func(L *lua.LState) int { return mpUnpack(L, 0, 0) }))
	t.RawSetString("unpack_one", L.NewFunction(func(L *lua.LState) int {
		return mpUnpack(L, 1, L.OptInt(2, 0))
	}))
	t.RawSetString("unpack_limit", L.NewFunction(func(L *lua.LState) int {
		return mpUnpack(L, L.CheckInt(2), L.OptInt(3, 0))
	}))
	t.RawSetString("_NAME", lua.LString("cmsgpack"))
	t.RawSetString("_VERSION", lua.LString("lua-cmsgpack 0.4.0"))
	t.RawSetString("_COPYRIGHT", lua.LString("Copyright (C) 2012, Salvatore Sanfilippo"))
	t.RawSetString("_DESCRIPTION", lua.LString("MessagePack C implementation for Lua"))
	return t
}

// mpEncoder is one cmsgpack.pack call: a table reached many times is
// encoded each time, so the output is bounded by the memory limit, and
// the encoding stops when the run ends.
type mpEncoder struct {
	L   *lua.LState
	lim *limits
	tk  ticker
}

func mpPack(L *lua.LState, lim *limits) int {
	n := L.GetTop()
	if n == 0 {
		L.ArgError(0, "MessagePack pack needs input.")
	}
	enc := &mpEncoder{L: L, lim: lim}
	var b []byte
	for i := 1; i <= n; i++ {
		b = enc.encode(b, L.Get(i), 0)
	}
	L.Push(lua.LString(b))
	return 1
}

func (enc *mpEncoder) encode(b []byte, v lua.LValue, level int) []byte {
	enc.tk.tick(enc.L)
	if int64(len(b)) > enc.lim.maxBytes() {
		outOfMemory(enc.L)
	}
	switch v := v.(type) {
	case lua.LString:
		return mpBytes(b, string(v))
	case lua.LBool:
		if v {
			return append(b, 0xc3)
		}
		return append(b, 0xc2)
	case lua.LNumber:
		f := float64(v)
		if !math.IsInf(f, 0) && !math.IsNaN(f) && f == float64(int64(f)) {
			return mpInt(b, int64(f))
		}
		if f32 := float32(f); float64(f32) == f {
			b = append(b, 0xca)
			return binary.BigEndian.AppendUint32(b, math.Float32bits(f32))
		}
		b = append(b, 0xcb)
		return binary.BigEndian.AppendUint64(b, math.Float64bits(f))
	case *lua.LTable:
		if level == 16 {
			return append(b, 0xc0)
		}
		if n, ok := mpArrayLen(v); ok {
			b = mpHeader(b, 0x90, 0xdc, 0xdd, n)
			for i := 1; i <= n; i++ {
				b = enc.encode(b, v.RawGetInt(i), level+1)
			}
			return b
		}
		n := 0
		forEach(v, func(_, _ lua.LValue) { n++ })
		b = mpHeader(b, 0x80, 0xde, 0xdf, n)
		forEach(v, func(k, val lua.LValue) {
			b = enc.encode(b, k, level+1)
			b = enc.encode(b, val, level+1)
		})
		return b
	}
	return append(b, 0xc0)
}

// mpArrayLen is table_is_an_array: every key a positive integer and as
// many keys as the largest.
func mpArrayLen(t *lua.LTable) (int, bool) {
	count, max := 0, 0
	ok := true
	forEach(t, func(k, _ lua.LValue) {
		n, isNum := k.(lua.LNumber)
		if !ok || !isNum || n <= 0 || float64(n) != float64(int(n)) {
			ok = false
			return
		}
		max = maxInt(max, int(n))
		count++
	})
	return max, ok && max == count
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func mpHeader(b []byte, fix, h16, h32 byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, fix|byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, h16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, h32), uint32(n))
}

func mpBytes(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= 0xff:
		b = append(b, 0xd9, byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func mpInt(b []byte, n int64) []byte {
	switch {
	case n >= 0 && n <= 127:
		return append(b, byte(n))
	case n >= 0 && n <= 0xff:
		return append(b, 0xcc, byte(n))
	case n >= 0 && n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n >= 0 && n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	case n >= 0:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(n))
	case n >= -32:
		return append(b, byte(int8(n)))
	case n >= -128:
		return append(b, 0xd0, byte(int8(n)))
	case n >= -32768:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(int16(n)))
	case n >= -2147483648:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(int32(n)))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

type mpCursor struct {
	L     *lua.LState
	b     string
	p     int
	err   string
	depth int
	tk    ticker
}

// nest enters an array or a map: as deep as Lua's stack lets Redis's
// cmsgpack go.
func (c *mpCursor) nest(fn string) {
	c.depth++
	if c.depth+c.L.GetTop() > MaxResults {
		c.L.RaiseError("stack overflow (in function %s)", fn)
	}
}

func (c *mpCursor) need(n int) bool {
	if c.err == "" && len(c.b)-c.p < n {
		c.err = "Missing bytes in input."
	}
	return c.err == ""
}

func mpUnpack(L *lua.LState, limit, offset int) int {
	s := L.CheckString(1)
	if offset < 0 || limit < 0 {
		L.RaiseError("Invalid request to unpack with offset of %d and limit of %d.", offset, len(s))
	}
	if offset > len(s) {
		L.RaiseError("Start offset %d greater than input length %d.", offset, len(s))
	}
	all := limit == 0 && offset == 0
	if all {
		limit = math.MaxInt32
	}
	c := &mpCursor{L: L, b: s, p: offset}
	var out []lua.LValue
	for cnt := 0; c.p < len(s) && cnt < limit; cnt++ {
		if len(out)+L.GetTop()+1 > MaxResults {
			L.RaiseError("stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)")
		}
		v := c.decode()
		if c.err != "" {
			L.RaiseError("%s", c.err)
		}
		out = append(out, v)
	}
	L.SetTop(0)
	if !all {
		next := c.p
		if c.p >= len(s) {
			next = -1
		}
		L.Push(lua.LNumber(next))
	}
	for _, v := range out {
		L.Push(v)
	}
	return L.GetTop()
}

func (c *mpCursor) decode() lua.LValue {
	c.tk.tick(c.L)
	if !c.need(1) {
		return lua.LNil
	}
	t := c.b[c.p]
	be16 := func() int { return int(binary.BigEndian.Uint16([]byte(c.b[c.p+1 : c.p+3]))) }
	be32 := func() uint32 { return binary.BigEndian.Uint32([]byte(c.b[c.p+1 : c.p+5])) }
	be64 := func() uint64 { return binary.BigEndian.Uint64([]byte(c.b[c.p+1 : c.p+9])) }
	switch {
	case t == 0xcc:
		if c.need(2) {
			c.p += 2
			return lua.LNumber(c.b[c.p-1])
		}
	case t == 0xd0:
		if c.need(2) {
			c.p += 2
			return lua.LNumber(int8(c.b[c.p-1]))
		}
	case t == 0xcd, t == 0xd1:
		if c.need(3) {
			v := be16()
			c.p += 3
			if t == 0xd1 {
				return lua.LNumber(int16(v))
			}
			return lua.LNumber(v)
		}
	case t == 0xce, t == 0xd2:
		if c.need(5) {
			v := be32()
			c.p += 5
			if t == 0xd2 {
				return lua.LNumber(int32(v))
			}
			return lua.LNumber(v)
		}
	case t == 0xcf, t == 0xd3:
		if c.need(9) {
			v := be64()
			c.p += 9
			if t == 0xd3 {
				return lua.LNumber(int64(v))
			}
			return lua.LNumber(v)
		}
	case t == 0xc0:
		c.p++
		return lua.LNil
	case t == 0xc3:
		c.p++
		return lua.LTrue
	case t == 0xc2:
		c.p++
		return lua.LFalse
	case t == 0xca:
		if c.need(5) {
			v := be32()
			c.p += 5
			return lua.LNumber(math.Float32frombits(v))
		}
	case t == 0xcb:
		if c.need(9) {
			v := be64()
			c.p += 9
			return lua.LNumber(math.Float64frombits(v))
		}
	case t == 0xd9:
		if c.need(2) {
			return c.str(2, int(c.b[c.p+1]))
		}
	case t == 0xda:
		if c.need(3) {
			return c.str(3, be16())
		}
	case t == 0xdb:
		if c.need(5) {
			return c.str(5, int(be32()))
		}
	case t == 0xdc:
		if c.need(3) {
			n := be16()
			c.p += 3
			return c.array(n)
		}
	case t == 0xdd:
		if c.need(5) {
			n := int(be32())
			c.p += 5
			return c.array(n)
		}
	case t == 0xde:
		if c.need(3) {
			n := be16()
			c.p += 3
			return c.hash(n)
		}
	case t == 0xdf:
		if c.need(5) {
			n := int(be32())
			c.p += 5
			return c.hash(n)
		}
	case t&0x80 == 0:
		c.p++
		return lua.LNumber(t)
	case t&0xe0 == 0xe0:
		c.p++
		return lua.LNumber(int8(t))
	case t&0xe0 == 0xa0:
		return c.str(1, int(t&0x1f))
	case t&0xf0 == 0x90:
		c.p++
		return c.array(int(t & 0xf))
	case t&0xf0 == 0x80:
		c.p++
		return c.hash(int(t & 0xf))
	default:
		c.err = "Bad data format in input."
	}
	return lua.LNil
}

func (c *mpCursor) str(hdr, n int) lua.LValue {
	if !c.need(hdr + n) {
		return lua.LNil
	}
	s := c.b[c.p+hdr : c.p+hdr+n]
	c.p += hdr + n
	return lua.LString(s)
}

func (c *mpCursor) array(n int) lua.LValue {
	c.nest("mp_decode_to_lua_array")
	defer func() { c.depth-- }()
	t := c.L.NewTable()
	for i := 1; i <= n && c.err == ""; i++ {
		t.RawSetInt(i, c.decode())
	}
	return t
}

func (c *mpCursor) hash(n int) lua.LValue {
	c.nest("mp_decode_to_lua_hash")
	defer func() { c.depth-- }()
	t := c.L.NewTable()
	for i := 0; i < n && c.err == ""; i++ {
		k := c.decode()
		v := c.decode()
		if c.err == "" && k != lua.LNil {
			t.RawSet(k, v)
		}
	}
	return t
}
