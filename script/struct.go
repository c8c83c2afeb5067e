package script

import (
	"encoding/binary"
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// struct is Roberto Ierusalimschy's lua_struct as Redis ships it, on a
// 64-bit little-endian build (long and size_t 8 bytes, int 4, default
// alignment 1, '!' alone aligns to 8).

func openStruct(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("pack", L.NewFunction(structPack))
	t.RawSetString("unpack", L.NewFunction(structUnpack))
	t.RawSetString("size", L.NewFunction(structSize))
	return t
}

type structHeader struct {
	little bool
	align  int
}

type structFmt struct {
	L   *lua.LState
	s   string
	i   int
	hdr structHeader
}

func newStructFmt(L *lua.LState) *structFmt {
	return &structFmt{L: L, s: L.CheckString(1), hdr: structHeader{little: true, align: 1}}
}

func (f *structFmt) getnum(def int) int {
	if f.i >= len(f.s) || f.s[f.i] < '0' || f.s[f.i] > '9' {
		return def
	}
	a := 0
	for f.i < len(f.s) && f.s[f.i] >= '0' && f.s[f.i] <= '9' {
		if a > (math.MaxInt32-int(f.s[f.i]-'0'))/10 {
			f.L.RaiseError("integral size overflow")
		}
		a = a*10 + int(f.s[f.i]-'0')
		f.i++
	}
	return a
}

func (f *structFmt) optsize(opt byte) int {
	switch opt {
	case 'B', 'b':
		return 1
	case 'H', 'h':
		return 2
	case 'L', 'l', 'T', 'd':
		return 8
	case 'f':
		return 4
	case 'x':
		return 1
	case 'c':
		return f.getnum(1)
	case 'i', 'I':
		sz := f.getnum(4)
		if sz > 32 {
			f.L.RaiseError("integral size %d is larger than limit of %d", sz, 32)
		}
		return sz
	}
	return 0
}

func (f *structFmt) toalign(pos int, opt byte, size int) int {
	if size == 0 || opt == 'c' {
		return 0
	}
	if size > f.hdr.align {
		size = f.hdr.align
	}
	return (size - (pos & (size - 1))) & (size - 1)
}

func (f *structFmt) control(opt byte) {
	switch opt {
	case ' ':
	case '>':
		f.hdr.little = false
	case '<':
		f.hdr.little = true
	case '!':
		a := f.getnum(8)
		if a <= 0 || a&(a-1) != 0 {
			f.L.RaiseError("alignment %d is not a power of 2", a)
		}
		f.hdr.align = a
	default:
		f.L.ArgError(1, "invalid format option '"+string(opt)+"'")
	}
}

func putUint(b []byte, v uint64, size int, little bool) []byte {
	buf := make([]byte, size)
	for i := range size {
		j := i
		if !little {
			j = size - 1 - i
		}
		if i < 8 {
			buf[j] = byte(v >> (8 * i))
		}
	}
	return append(b, buf...)
}

func structPack(L *lua.LState) int {
	f := newStructFmt(L)
	arg := 2
	var b []byte
	for f.i < len(f.s) {
		opt := f.s[f.i]
		f.i++
		size := f.optsize(opt)
		for range f.toalign(len(b), opt, size) {
			b = append(b, 0)
		}
		switch opt {
		case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
			n := float64(L.CheckNumber(arg))
			arg++
			var v uint64
			if n < 0 {
				v = uint64(int64(n))
			} else {
				v = uint64(n)
			}
			b = putUint(b, v, size, f.hdr.little)
		case 'x':
			b = append(b, 0)
		case 'f':
			v := math.Float32bits(float32(L.CheckNumber(arg)))
			arg++
			b = putUint(b, uint64(v), 4, f.hdr.little)
		case 'd':
			v := math.Float64bits(float64(L.CheckNumber(arg)))
			arg++
			b = putUint(b, v, 8, f.hdr.little)
		case 'c', 's':
			s := L.CheckString(arg)
			arg++
			if size == 0 {
				size = len(s)
			}
			if len(s) < size {
				L.ArgError(arg, "string too short")
			}
			b = append(b, s[:size]...)
			if opt == 's' {
				b = append(b, 0)
			}
		default:
			f.control(opt)
		}
	}
	L.Push(lua.LString(b))
	return 1
}

func structUnpack(L *lua.LState) int {
	f := newStructFmt(L)
	data := L.CheckString(2)
	pos := L.OptInt(3, 1)
	if pos <= 0 {
		L.ArgError(3, "offset must be 1 or greater")
	}
	pos--
	var out []lua.LValue
	for f.i < len(f.s) {
		opt := f.s[f.i]
		f.i++
		size := f.optsize(opt)
		pos += f.toalign(pos, opt, size)
		if size > len(data) || pos > len(data)-size {
			L.ArgError(2, "data string too short")
		}
		if L.GetTop()+len(out)+2 > MaxResults {
			L.RaiseError("stack overflow (too many results)")
		}
		switch opt {
		case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
			var v uint64
			for i := range size {
				j := size - 1 - i
				if !f.hdr.little {
					j = i
				}
				v = v<<8 | uint64(data[pos+j])
			}
			if opt >= 'a' && size < 8 && size > 0 {
				mask := ^uint64(0) << (size*8 - 1)
				if v&mask != 0 {
					v |= mask
				}
			}
			if opt >= 'a' {
				out = append(out, lua.LNumber(float64(int64(v))))
			} else {
				out = append(out, lua.LNumber(float64(v)))
			}
		case 'x':
		case 'f':
			var v uint32
			if f.hdr.little {
				v = binary.LittleEndian.Uint32([]byte(data[pos : pos+4]))
			} else {
				v = binary.BigEndian.Uint32([]byte(data[pos : pos+4]))
			}
			out = append(out, lua.LNumber(math.Float32frombits(v)))
		case 'd':
			var v uint64
			if f.hdr.little {
				v = binary.LittleEndian.Uint64([]byte(data[pos : pos+8]))
			} else {
				v = binary.BigEndian.Uint64([]byte(data[pos : pos+8]))
			}
			out = append(out, lua.LNumber(math.Float64frombits(v)))
		case 'c':
			if size == 0 {
				ok := false
				if len(out) > 0 {
					_, ok = out[len(out)-1].(lua.LNumber)
				}
				if !ok {
					L.RaiseError("format 'c0' needs a previous size")
				}
				size = int(out[len(out)-1].(lua.LNumber))
				out = out[:len(out)-1]
				if size > len(data) || pos > len(data)-size {
					L.ArgError(2, "data string too short")
				}
			}
			out = append(out, lua.LString(data[pos:pos+size]))
		case 's':
			e := strings.IndexByte(data[pos:], 0)
			if e < 0 {
				L.RaiseError("unfinished string in data")
			}
			size = e + 1
			out = append(out, lua.LString(data[pos:pos+e]))
		default:
			f.control(opt)
		}
		pos += size
	}
	for _, v := range out {
		L.Push(v)
	}
	L.Push(lua.LNumber(pos + 1))
	return len(out) + 1
}

func structSize(L *lua.LState) int {
	f := newStructFmt(L)
	pos := 0
	for f.i < len(f.s) {
		opt := f.s[f.i]
		f.i++
		size := f.optsize(opt)
		pos += f.toalign(pos, opt, size)
		switch {
		case opt == 's':
			L.ArgError(1, "option 's' has no fixed size")
		case opt == 'c' && size == 0:
			L.ArgError(1, "option 'c0' has no fixed size")
		}
		if !isAlnum(opt) {
			f.control(opt)
		}
		pos += size
	}
	L.Push(lua.LNumber(pos))
	return 1
}

func isAlnum(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}
