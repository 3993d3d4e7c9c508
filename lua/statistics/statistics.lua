-- Statistics: Python's sum and statistics module (mean, median, stdev), numpy's
-- percentile and histogram, over lists of numbers.

-- The numbers of `list` (numeric strings converted, as Lua arithmetic does), checked.
local function numbers_of(name, list)
  if type(list) ~= "table" then
    error(string.format("%s: argument 1 (list) must be a table, got %s", name, type(list)), 3)
  end
  local out = {}
  for i = 1, #list do
    local item = list[i]
    local number = tonumber(item)
    if number == nil or type(item) == "boolean" then
      error(string.format("%s: item %d is %s, not a number", name, i,
        item == nil and "nil" or (type(item) == "string" and string.format("%q", item) or "a " .. type(item))), 3)
    end
    out[i] = number
  end
  return out
end

local function nonempty(name, numbers)
  if #numbers == 0 then error(name .. ": the list is empty", 3) end
  return numbers
end

-- a + b; a float where integers would wrap around (Python's integers never do).
local function add(a, b)
  local sum = a + b
  if math.type(sum) == "integer" and (sum < a) ~= (b < 0) then
    return (a + 0.0) + b
  end
  return sum
end

local function total(numbers)
  local sum = 0
  for i = 1, #numbers do sum = add(sum, numbers[i]) end
  return sum
end

local function sorted_copy(numbers)
  table.sort(numbers)
  return numbers
end

--- Adds up numbers, like Python's sum(list) (0 for an empty list).
---
--- ```lua
--- sum({1, 2, 3.5}) --> 6.5
--- ```
---@param list number[] The numbers
---@return number total The sum
function sum(list)
  return total(numbers_of("sum", list))
end

--- The arithmetic mean, like statistics.mean (an error for an empty list).
---
--- ```lua
--- mean({1, 2, 3, 4}) --> 2.5
--- ```
---@param list number[] The numbers
---@return number mean The mean
function mean(list)
  local numbers = nonempty("mean", numbers_of("mean", list))
  return total(numbers) / #numbers
end

--- The middle value, like statistics.median (the mean of the middle two for an even count).
---
--- ```lua
--- median({5, 1, 4, 2}) --> 3.0
--- ```
---@param list number[] The numbers
---@return number median The median
function median(list)
  local numbers = sorted_copy(nonempty("median", numbers_of("median", list)))
  local n = #numbers
  local middle = (n + 1) // 2
  if n % 2 == 1 then return numbers[middle] end
  return add(numbers[middle], numbers[middle + 1]) / 2
end

--- The p-th percentile (p in 0..100) with linear interpolation, like numpy.percentile's default.
---
--- ```lua
--- percentile({1, 2, 3, 4}, 25) --> 1.75
--- ```
---@param list number[] The numbers
---@param p number The percentile, 0 to 100 (50 is the median)
---@return number value The interpolated value
function percentile(list, p)
  local numbers = sorted_copy(nonempty("percentile", numbers_of("percentile", list)))
  if type(p) ~= "number" or not (p >= 0 and p <= 100) then
    error(string.format("percentile: argument 2 (p) must be a number from 0 to 100, got %s", tostring(p)), 2)
  end
  -- numpy's arithmetic, in floats (so that integers far apart cannot wrap around).
  local position = (#numbers - 1) * (p / 100)
  local below = math.floor(position)
  local fraction = position - below
  local low = numbers[below + 1] + 0.0
  if fraction == 0 then return low end
  local high = numbers[below + 2] + 0.0
  if fraction >= 0.5 then return high - (high - low) * (1 - fraction) end
  return low + (high - low) * fraction
end

--- The standard deviation, like statistics.stdev (sample, n - 1); population = true: pstdev.
---
--- ```lua
--- stdev({2, 4, 4, 4, 5, 5, 7, 9}, true) --> 2.0
--- ```
---@param list number[] The numbers
---@param population? boolean Divide by n, not n - 1
---@return number stdev The standard deviation
function stdev(list, population)
  local numbers = numbers_of("stdev", list)
  local n = #numbers
  local needed = population and 1 or 2
  if n < needed then
    error(string.format("stdev: needs at least %d numbers, got %d", needed, n), 2)
  end
  local average = total(numbers) / n
  local squares = 0
  for i = 1, n do
    local deviation = numbers[i] - average
    squares = squares + deviation * deviation
  end
  return math.sqrt(squares / (population and n or n - 1))
end

-- The index (1-based) of the bin of `x` among ascending `edges`, nil outside them;
-- the last bin includes its right edge.
local function bin_of(edges, x)
  local bins = #edges - 1
  if x < edges[1] or x > edges[bins + 1] then return nil end
  if x == edges[bins + 1] then return bins end
  local low, high = 1, bins
  while low < high do
    local mid = (low + high + 1) // 2
    if edges[mid] <= x then low = mid else high = mid - 1 end
  end
  return low
end

-- `bins` equal-width edges from the smallest to the largest number, in floats, as numpy
-- computes them (numpy.linspace).
local function even_edges(numbers, bins)
  local low, high = math.huge, -math.huge
  for i = 1, #numbers do
    local x = numbers[i]
    if x ~= x or x == math.huge or x == -math.huge then
      error(string.format("histogram: item %d is %s, so the bins have no finite range (give bins as a list of edges)",
        i, tostring(x)), 3)
    end
    low, high = math.min(low, x), math.max(high, x)
  end
  if #numbers == 0 then low, high = 0, 1 end
  low, high = low + 0.0, high + 0.0
  if low == high then low, high = low - 0.5, high + 0.5 end
  local step = (high - low) / bins
  local edges = {}
  for i = 0, bins do
    edges[i + 1] = step == 0 and i / bins * (high - low) + low or i * step + low
  end
  edges[bins + 1] = high
  return edges
end

--- Counts numbers per bin, like numpy.histogram: equal-width bins from min to max, or given edges.
---
--- ```lua
--- histogram({1, 2, 2, 3, 4}, 3) --> {1, 2, 2}, {1.0, 2.0, 3.0, 4.0}
--- ```
---@param list number[] The numbers
---@param bins? integer|number[] Bin count (default 10) or edges
---@return integer[] counts Numbers per bin
---@return number[] edges The bin edges
function histogram(list, bins)
  local numbers = numbers_of("histogram", list)
  local edges
  if type(bins) == "table" then
    edges = numbers_of("histogram", bins)
    if #edges < 2 then error("histogram: argument 2 (bins) needs at least 2 edges", 2) end
    for i = 2, #edges do
      if edges[i] < edges[i - 1] then error("histogram: argument 2 (bins) edges must be ascending", 2) end
    end
  else
    bins = bins or 10
    if math.type(bins) ~= "integer" or bins < 1 then
      error(string.format("histogram: argument 2 (bins) must be a positive integer or a list of edges, got %s", tostring(bins)), 2)
    end
    edges = even_edges(numbers, bins)
  end
  local counts = {}
  for i = 1, #edges - 1 do counts[i] = 0 end
  for i = 1, #numbers do
    local bin = bin_of(edges, numbers[i])
    if bin then counts[bin] = counts[bin] + 1 end
  end
  return counts, edges
end
