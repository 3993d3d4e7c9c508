--- Broken.
---@param a number
---@return number
function f(a
  return a +
end end
local t = { [1 = 2
