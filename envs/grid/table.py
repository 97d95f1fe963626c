"""Registration rows of the grid family (imported by ``import verigym``; keep it light)."""

from verigym.registration import EnvRow, variants

_GRID = "verigym.envs.grid"
_BATCHED = "verigym.envs.grid.batched"  # natively batched engines (gymnasium.make_vec)

ROWS: list[EnvRow] = [
    *variants(
        "verigym/Treasure-{}-v0",
        f"{_GRID}.treasure:TreasureEnv",
        family="grid",
        vector_entry_point=f"{_BATCHED}:treasure_vector",
        rows={"7x7": {"size": 7}, "12x12": {"size": 12, "wall_density": 0.3}},
        description="Walk to the treasure on a grid with random walls (the tensor tutorial env).",
    ),
    *variants(
        "verigym/Empty-{}-v0",
        f"{_GRID}.navigation:EmptyEnv",
        family="grid",
        vector_entry_point=f"{_BATCHED}:empty_vector",
        rows={"5x5": {"size": 5}, "8x8": {"size": 8}, "16x16": {"size": 16}},
        description="MiniGrid Empty: reach the goal in an empty room (random start).",
    ),
    EnvRow(
        "verigym/FourRooms-v0",
        f"{_GRID}.navigation:FourRoomsEnv",
        family="grid",
        vector_entry_point=f"{_BATCHED}:four_rooms_vector",
        description="MiniGrid FourRooms: reach the goal through the gaps of four rooms.",
    ),
    *variants(
        "verigym/DoorKey-{}-v0",
        f"{_GRID}.doorkey:DoorKeyEnv",
        family="grid",
        vector_entry_point=f"{_BATCHED}:doorkey_vector",
        rows={"5x5": {"size": 5}, "6x6": {"size": 6}, "8x8": {"size": 8}, "16x16": {"size": 16}},
        description="MiniGrid DoorKey: pick up the key, unlock the door, reach the goal.",
    ),
    *variants(
        "verigym/MultiRoom-{}-v0",
        f"{_GRID}.doorkey:MultiRoomEnv",
        family="grid",
        vector_entry_point=f"{_BATCHED}:multiroom_vector",
        rows={
            "N2-S4": {"num_rooms": 2, "max_room_size": 4},
            "N4-S5": {"num_rooms": 4, "max_room_size": 5},
            "N6": {"num_rooms": 6, "max_room_size": 10},
        },
        description="MiniGrid MultiRoom: open the door of each room in a chain (long horizon).",
    ),
    *variants(
        "verigym/KeyCorridor-{}-v0",
        f"{_GRID}.doorkey:KeyCorridorEnv",
        family="grid",
        vector_entry_point=f"{_BATCHED}:key_corridor_vector",
        rows={
            "S3R1": {"room_size": 3, "num_rows": 1},
            "S4R3": {"room_size": 4, "num_rows": 3},
            "S6R3": {"room_size": 6, "num_rows": 3},
        },
        description="MiniGrid KeyCorridor: fetch a key, unlock a room, pick up the ball (long horizon).",
    ),
    *variants(
        "verigym/LavaCrossing-{}-v0",
        f"{_GRID}.navigation:LavaCrossingEnv",
        family="grid",
        vector_entry_point=f"{_BATCHED}:lava_crossing_vector",
        rows={
            "S9N1": {"size": 9, "num_crossings": 1},
            "S9N3": {"size": 9, "num_crossings": 3},
            "S11N5": {"size": 11, "num_crossings": 5},
        },
        description="MiniGrid LavaCrossing: cross rivers of lava through their gaps to the goal.",
    ),
    *variants(
        "verigym/Maze-{}-v0",
        f"{_GRID}.navigation:MazeEnv",
        family="grid",
        vector_entry_point=f"{_BATCHED}:maze_vector",
        rows={"11x11": {"size": 11}, "21x21": {"size": 21}},
        description="A perfect maze (recursive backtracker); the goal is at the farthest cell.",
    ),
    *variants(
        "verigym/IceLake-{}-v0",
        f"{_GRID}.icelake:IceLakeEnv",
        family="grid",
        vector_entry_point=f"{_BATCHED}:icelake_vector",
        rows={"4x4": {"size": 4}, "8x8": {"size": 8}},
        description="A procedural slippery frozen lake (FrozenLake kind), always solvable.",
    ),
    *variants(
        "verigym/Sokoban-{}-v0",
        f"{_GRID}.sokoban:SokobanEnv",
        family="grid",
        rows={
            "6x6-B1": {"size": 6, "num_boxes": 1, "reverse_steps": 60},
            "7x7-B2": {"size": 7, "num_boxes": 2, "reverse_steps": 100},
            "8x8-B3": {"size": 8, "num_boxes": 3, "reverse_steps": 150},
        },
        description="Sokoban by reverse play (always solvable); BFS solver for the optimum.",
    ),
    *variants(
        "verigym/GoToObject-{}-v0",
        f"{_GRID}.goto:GoToObjectEnv",
        family="grid",
        vector_entry_point=f"{_BATCHED}:goto_object_vector",
        rows={"6x6-N2": {"size": 6, "num_objects": 2}, "8x8-N4": {"size": 8, "num_objects": 4}},
        description='BabyAI-style language mission: "go to the red ball" among distractors.',
    ),
    *variants(
        "verigym/Coverage-{}-v0",
        f"{_GRID}.coverage:CoverageEnv",
        family="grid",
        rows={"6x6": {"size": 6}, "10x10": {"size": 10, "obstacle_density": 0.15}},
        description="Visit every free cell; the reward of a revisit decays (diminishing returns).",
    ),
]
