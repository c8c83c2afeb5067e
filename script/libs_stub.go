package script

import lua "github.com/yuin/gopher-lua"

func openCjson(L *lua.LState) *lua.LTable    { return L.NewTable() }
func openBit(L *lua.LState) *lua.LTable      { return L.NewTable() }
func openStruct(L *lua.LState) *lua.LTable   { return L.NewTable() }
func openCmsgpack(L *lua.LState) *lua.LTable { return L.NewTable() }
