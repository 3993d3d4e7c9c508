--- Adds two numbers.
---@param a number The first
---@param b number The second
---@return number sum The sum
function f(a, b)
  return a + b
end
