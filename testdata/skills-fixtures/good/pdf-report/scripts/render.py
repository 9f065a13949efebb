import sys

print("rendering", sys.argv[1], "to", sys.argv[2])
