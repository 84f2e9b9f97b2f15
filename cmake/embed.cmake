# Turn a text file into a C array: cmake -DIN=file -DOUT=file.c -DSYM=name -P embed.cmake
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE "${OUT}" "/* generated from ${IN}; do not edit */\nconst char ${SYM}[] = {${body}0x00};\n")
