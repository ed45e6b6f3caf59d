#!/usr/bin/env python3
"""cuda-emu: turns a .cu/.cuh file into C++ that builds against
tests/cuda_emu/include (README.md here). Five rewrites, line numbers kept
(a #line directive names the original file):
  kernel<<<grid, block[, smem[, stream]]>>>(args)
      -> emu::launch_kernel(emu::cfg(grid, block, ...), "kernel", kernel, args)
  cudaLaunchKernelEx(cfg, kernel, args)
      -> emu::launch_kernel_ex(cfg, "kernel", kernel, args)
  cudaLaunchCooperativeKernel(kernel, grid, block, args...)
      -> emu::launch_cooperative("kernel", kernel, grid, block, args...)
  extern __shared__ T name[];  ->  T *name = (T *)emu::dynamic_smem();
  __shared__ T name...;  ->  __shared__ T name...; emu::shared_static(&name, sizeof name);
      (a static __shared__ variable, the first word of its line: the
      emulator keeps one copy per block of a cooperative launch)
Usage: translate.py IN OUT"""
import re
import sys


def kernel_start(s, i):
    """Start of the kernel expression that ends just before index i."""
    j = i
    while j > 0 and s[j - 1].isspace():
        j -= 1
    if j > 0 and s[j - 1] == '>':  # template arguments
        depth = 0
        while j > 0:
            j -= 1
            if s[j] == '>':
                depth += 1
            elif s[j] == '<':
                depth -= 1
                if depth == 0:
                    break
    while j > 0 and (s[j - 1].isalnum() or s[j - 1] in '_:'):
        j -= 1
    return j


def balanced(s, i):
    """s[i] == '('; index just past the matching ')'."""
    depth = 0
    for k in range(i, len(s)):
        if s[k] == '(':
            depth += 1
        elif s[k] == ')':
            depth -= 1
            if depth == 0:
                return k + 1
    raise SystemExit('translate.py: unbalanced parentheses after a launch')


def launches(s):
    out = []
    pos = 0
    while True:
        i = s.find('<<<', pos)
        if i < 0:
            out.append(s[pos:])
            return ''.join(out)
        start = kernel_start(s, i)
        name = s[start:i].strip()
        end_cfg = s.find('>>>', i)
        cfg = s[i + 3:end_cfg]
        k = end_cfg + 3
        while s[k].isspace():
            k += 1
        if s[k] != '(':
            raise SystemExit('translate.py: no argument list after the launch of ' + name)
        end = balanced(s, k)
        args = s[k + 1:end - 1]
        label = re.sub(r'\s+', ' ', name)
        call = 'emu::launch_kernel(emu::cfg(%s), "%s", %s%s)' % (
            cfg, label, name, (', ' + args) if args.strip() else '')
        out.append(s[pos:start])
        out.append(call)
        pos = end


def top_comma(s, j, end):
    """Index of the first comma in s[j:end] outside parentheses and template
    brackets (end when there is none)."""
    depth = 0
    while j < end and not (depth == 0 and s[j] == ','):
        if s[j] in '(<':
            depth += 1
        elif s[j] in ')>':
            depth -= 1
        j += 1
    return j


def rewrite_calls(s, fname, rewrite):
    """Each call fname(...) in s becomes rewrite(s, k, end): k the index of
    its '(' and end the index just past its ')'."""
    out = []
    pos = 0
    while True:
        i = s.find(fname + '(', pos)
        if i < 0:
            out.append(s[pos:])
            return ''.join(out)
        k = i + len(fname)
        end = balanced(s, k)
        out.append(s[pos:i])
        out.append(rewrite(s, k, end))
        pos = end


def launch_ex(s, k, end):
    """cudaLaunchKernelEx(cfg, kernel, args) -> emu::launch_kernel_ex(cfg,
    "kernel", kernel, args)."""
    first = s.find(',', k)
    j = top_comma(s, first + 1, end - 1)
    kernel = s[first + 1:j].strip()
    label = re.sub(r'\s+', ' ', kernel)
    return 'emu::launch_kernel_ex(%s, "%s", %s%s' % (s[k + 1:first], label, kernel, s[j:end])


def launch_coop(s, k, end):
    """cudaLaunchCooperativeKernel(kernel, rest) -> emu::launch_cooperative(
    "kernel", kernel, rest); a (void *) or (const void *) cast in front of
    the kernel is dropped (the emulator needs its parameter types)."""
    j = top_comma(s, k + 1, end - 1)
    kernel = re.sub(r'^\(\s*(const\s+)?void\s*\*\s*\)\s*', '', s[k + 1:j].strip())
    label = re.sub(r'\s+', ' ', kernel)
    return 'emu::launch_cooperative("%s", %s%s' % (label, kernel, s[j:end])


def shared_statics(s):
    """After each static __shared__ declaration (the first word of its line,
    ending at the first ';' outside brackets), a call that registers it."""
    out = []
    pos = 0
    for m in re.finditer(r'^[ \t]*__shared__\b', s, re.M):
        if m.start() < pos:
            continue
        depth = 0
        j = m.end()
        while depth or s[j] != ';':
            if s[j] in '([{':
                depth += 1
            elif s[j] in ')]}':
                depth -= 1
            elif s[j] == ',' and depth == 0:
                raise SystemExit('translate.py: one name a __shared__ declaration: ' + s[m.start():j])
            j += 1
        name = re.search(r'(\w+)\s*(?:\[[^\]]*\]\s*)*$', s[m.end():j])
        if not name:
            raise SystemExit('translate.py: no name in ' + s[m.start():j + 1])
        out.append(s[pos:j + 1])
        out.append(' emu::shared_static(&%s, sizeof %s);' % (name[1], name[1]))
        pos = j + 1
    out.append(s[pos:])
    return ''.join(out)


SHARED = re.compile(r'extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?'
                    r'([A-Za-z_][\w:]*(?:\s*\*)*)\s+(?:__align__\(\s*\d+\s*\)\s+)?'
                    r'(\w+)\s*\[\s*\]\s*;')


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        s = f.read()
    s = SHARED.sub(lambda m: '%s *%s = (%s *)emu::dynamic_smem();' % (m[1], m[2], m[1]), s)
    s = launches(s)
    s = rewrite_calls(s, 'cudaLaunchKernelEx', launch_ex)
    s = rewrite_calls(s, 'cudaLaunchCooperativeKernel', launch_coop)
    s = shared_statics(s)
    with open(dst, 'w') as f:
        f.write('#line 1 "%s"\n' % src)
        f.write(s)


if __name__ == '__main__':
    main()
