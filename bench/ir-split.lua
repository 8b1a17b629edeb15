--- bench/ir-split.lua: a callgrind profile's instructions, by where they ran.
--
--   lua5.4 bench/ir-split.lua callgrind.out...
--   -> per file: "SPLIT <file> total=<Ir> provider=<Ir> binding=<Ir> interpreter=<Ir> other=<Ir>"
--
-- Self cost only (what each object's own code executed), summed over the
-- profile; it adds up to callgrind's "summary:" total.  The groups:
--   provider     libibverbs and the rxe provider (librxe-rdmav*)
--   binding      ibverbs/core.so (this module), pyverbs' extension modules
--   interpreter  lua5.4 / liblua5.4, luajit / libluajit, python3
--   other        libc, the dynamic loader, the C reference program itself
local function group(obj)
  if obj:find("libibverbs", 1, true) or obj:find("librxe", 1, true) then return "provider" end
  if obj:find("ibverbs/core.so", 1, true) or obj:find("/pyverbs/", 1, true) then return "binding" end
  if obj:find("lua", 1, true) or obj:find("python", 1, true) then return "interpreter" end
  return "other"
end

local GROUPS = { "provider", "binding", "interpreter", "other" }

local function split(path)
  local names, sums, total = {}, { provider = 0, binding = 0, interpreter = 0, other = 0 }, 0
  local cur = "other"
  local skip = false -- the line after calls= is the call's inclusive cost
  for line in io.lines(path) do
    local c = line:byte(1)
    if c and (c >= 48 and c <= 57 or c == 43 or c == 45 or c == 42) then -- digit + - *
      if skip then
        skip = false
      else
        local ir = line:match("^%S+%s+(%d+)")
        if ir then
          sums[cur] = sums[cur] + tonumber(ir)
          total = total + tonumber(ir)
        end
      end
    elseif line:sub(1, 3) == "ob=" then
      local id, name = line:match("^ob=%((%d+)%)%s*(.*)$")
      if id then
        if name ~= "" then names[id] = name end
        cur = group(names[id] or "")
      else
        cur = group(line:sub(4))
      end
    elseif line:sub(1, 4) == "cob=" then
      local id, name = line:match("^cob=%((%d+)%)%s*(.*)$")
      if id and name ~= "" then names[id] = name end
    elseif line:sub(1, 6) == "calls=" then
      skip = true
    end
  end
  return total, sums
end

for _, path in ipairs(arg) do
  local total, sums = split(path)
  local parts = {}
  for _, g in ipairs(GROUPS) do parts[#parts + 1] = g .. "=" .. sums[g] end
  print(("SPLIT %s total=%d %s"):format(path, total, table.concat(parts, " ")))
end
