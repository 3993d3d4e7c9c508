local M = {}
function M.g(x) return x end
print("loaded")
function f(name, extra) return ("hi " .. name) end
function f() end
function string.upper(s) return s end
