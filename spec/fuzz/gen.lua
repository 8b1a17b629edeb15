--- The fuzzer's generator (tools/fuzz.lua): each step is one or more lines of
-- Lua, `T(slot, function() return <call> end)`, run against spec/fuzz/prelude.lua.
-- Methods are discovered from the registry's "ibverbs.*" metatables, so a new
-- method is fuzzed as soon as it exists; the templates only make the
-- arguments of known methods plausible often enough to reach deep code, and
-- any argument may still be swapped for a bad one.
--
--   local gen = require "fuzz.gen"
--   local g = gen.new(seed, F.O, gen.discover(ibv), gen.functions(ibv, cm), {jit = ..., attacks = "a,b"})
--   g:setup(port); g:step(); g:note(slot)  -- lists of {line, slot}; note after a line ran
--
-- This file is the entry (gen.new, G:step, the attack and scenario names);
-- the generator's parts, each adding methods to the class G:
--   gen_values.lua     random numbers, value pools, discovery, value helpers
--   gen_structs.lua    verbs structures: SGEs, WRs, QP init and attributes, ...
--   gen_templates.lua  the arguments per method and module function, batch steps
--   gen_lines.lua      a call as a line, method and function calls, the world (setup)
--   gen_attacks.lua    the scenarios and the attack classes
local values = require "fuzz.gen_values"
require "fuzz.gen_structs"
local templates = require "fuzz.gen_templates"
local line = require("fuzz.gen_lines").line
local multistep = require "fuzz.gen_attacks"
local G, rng = values.G, values.rng
local T, S, A = templates.templates, multistep.scenarios, multistep.attacks

local gen = {}
gen.rng = rng
gen.discover, gen.functions, gen.kind = values.discover, values.functions, values.kind

--- A generator for seed; O is the live object table it reads (F.O).
function gen.new(seed, O, types, functions, opts)
  opts = opts or {}
  local g = setmetatable({ r = rng(seed), O = O, types = types, functions = functions,
                           slots = {}, by_kind = {}, next_slot = 1, jit = opts.jit,
                           attack_rate = opts.attack_rate or 18, kept = 0,
                           cm_port_next = 41000 + (seed * 131) % 8000 }, G)
  g.attack_names = gen.attack_names(opts.attacks)
  return g
end

gen.templates = T

gen.attacks = A
local ATTACK_NAMES = {}
for k in pairs(A) do ATTACK_NAMES[#ATTACK_NAMES + 1] = k end
table.sort(ATTACK_NAMES)

--- The attack classes to use: all, or those named in a comma-separated list.
function gen.attack_names(list)
  if not list or list == "" then return ATTACK_NAMES end
  local out = {}
  for n in list:gmatch("[^,]+") do
    if n ~= "none" then
      assert(A[n], "fuzz: no attack class '" .. n .. "' (" .. table.concat(ATTACK_NAMES, ", ") .. ")")
      out[#out + 1] = n
    end
  end
  return out
end

gen.scenarios = S
local SCENARIO_NAMES = {}
for k in pairs(S) do SCENARIO_NAMES[#SCENARIO_NAMES + 1] = k end
table.sort(SCENARIO_NAMES)

local function lines_of(self, steps)
  local out = {}
  for _, st in ipairs(steps) do
    if type(st) == "string" then
      local s = self:slot()
      out[#out + 1] = { line(s, st), s }
    elseif st.raw then
      out[#out + 1] = { st[1], st[2] }
    else
      out[#out + 1] = { line(st[2], st[1], st[3]), st[2] }
    end
  end
  return out
end

--- The next step: a list of {line, slot}.
function G:step()
  local r = self.r
  if #self.attack_names > 0 and r.int(100) <= self.attack_rate then
    local steps = A[r.pick(self.attack_names)](self)
    if steps then return lines_of(self, steps) end
  end
  local c = r.int(100)
  if c <= 12 then
    local steps = S[r.pick(SCENARIO_NAMES)](self)
    if steps then return lines_of(self, steps) end
  end
  if c <= 20 then
    local l, s = self:function_call()
    return { { l, s } }
  end
  if c == 21 then return { { line(0, 'collectgarbage("collect")'), 0 } } end
  local l, s = self:method_call()
  return { { l, s } }
end

return gen
