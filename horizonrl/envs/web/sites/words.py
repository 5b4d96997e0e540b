"""Word lists and fixed values the data generator draws from (`data.py`); changing any of them changes
the generated rows, hence the template's cache key and every task built from them."""

# fmt: off
ADJECTIVES = ["Classic", "Urban", "Alpine", "Coastal", "Vintage", "Modern", "Rugged", "Soft", "Bright",
              "Quiet", "Swift", "Cozy", "Bold", "Slim", "Royal", "Sunny", "Misty", "Golden", "Silver",
              "Midnight"]
CATEGORY_NOUNS = {"Clothing": ["Tee", "Hoodie", "Jacket", "Sweater", "Polo", "Cardigan"],
                  "Shoes": ["Sneaker", "Boot", "Sandal", "Loafer", "Runner"],
                  "Home & Kitchen": ["Mug", "Kettle", "Skillet", "Teapot", "Cutting Board", "Blender"],
                  "Electronics": ["Headphones", "Speaker", "Charger", "Keyboard", "Mouse", "Webcam"],
                  "Sports & Outdoors": ["Yoga Mat", "Water Bottle", "Backpack", "Tent", "Dumbbell"],
                  "Beauty": ["Face Cream", "Shampoo", "Lip Balm", "Perfume", "Soap"],
                  "Toys & Games": ["Puzzle", "Board Game", "Kite", "Robot Kit", "Plush Bear"],
                  "Office Products": ["Notebook", "Desk Lamp", "Pen Set", "Planner", "Stapler"]}
APPAREL = {"Shoes", "Clothing"}
COLORS = ["Black", "White", "Blue", "Red", "Green", "Gray", "Yellow", "Purple"]
SIZES = {"Clothing": ["XS", "S", "M", "L", "XL"], "Shoes": ["7", "8", "9", "10", "11"]}
FIRST = ["Emma", "Liam", "Olivia", "Noah", "Ava", "Mason", "Sophia", "Lucas", "Mia", "Ethan", "Chloe",
         "Leo", "Grace", "Owen", "Zoe", "Henry", "Nora", "Jack", "Ruby", "Adam", "Ivy", "Ryan", "Lily",
         "Samuel"]
LAST = ["Smith", "Garcia", "Chen", "Patel", "Nguyen", "Kim", "Brown", "Lopez", "Wilson", "Khan", "Novak",
        "Silva", "Okafor", "Jensen", "Rossi", "Tanaka", "Murphy", "Schmidt", "Dubois", "Costa"]
CITIES = [("Pittsburgh", "PA"), ("Columbus", "OH"), ("Austin", "TX"), ("Denver", "CO"),
          ("Portland", "OR"), ("Boston", "MA"), ("Madison", "WI"), ("Raleigh", "NC")]
STREETS = ["Maple Ave", "Oak St", "Pine Rd", "Cedar Ln", "Elm St", "Forbes Ave", "Walnut St", "Lake Dr",
           "Hill Rd", "River Rd", "Park Pl", "Main St"]
REVIEW_TITLES = {5: ["Love it", "Excellent", "Perfect fit", "Highly recommend"],
                 4: ["Very good", "Nice quality", "Happy with it"],
                 3: ["It is okay", "Average", "Decent for the price"],
                 2: ["Disappointing", "Not great"],
                 1: ["Terrible", "Broke quickly", "Do not buy"]}
ORDER_STATUSES = ["pending", "processing", "complete", "complete", "complete", "canceled"]
SHIPPING = {"flatrate": ("Flat Rate", 500), "free": ("Free Shipping", 0), "express": ("Express", 1500)}
FORUMS = [("books", "Books", "Talk about what you are reading"),
          ("gaming", "Gaming", "Video games and board games"),
          ("cooking", "Cooking", "Recipes and kitchen tips"),
          ("pittsburgh", "Pittsburgh", "News and events in Pittsburgh"),
          ("science", "Science", "Discoveries and questions"), ("movies", "Movies", "Films old and new"),
          ("music", "Music", "Bands, albums and gigs"),
          ("running", "Running", "Training, races and gear"),
          ("gardening", "Gardening", "Plants, soil and seasons"),
          ("personalfinance", "Personal Finance", "Budgets, saving and investing"),
          ("travel", "Travel", "Trips and tips"), ("technology", "Technology", "Gadgets and software")]
TOPICS = ["a question about", "my thoughts on", "best advice for", "a beginner guide to", "news about",
          "an update on", "what I learned from", "a discussion of", "recommendations for", "a review of"]
THINGS = {"books": ["fantasy novels", "poetry", "library apps", "audiobooks", "book clubs"],
          "gaming": ["speedruns", "indie games", "chess openings", "retro consoles", "co-op games"],
          "cooking": ["sourdough", "knife skills", "spicy curries", "meal prep", "cast iron pans"],
          "pittsburgh": ["the incline", "bike lanes", "pierogi festivals", "the strip district",
                         "bridges"],
          "science": ["black holes", "gene editing", "fusion energy", "coral reefs", "volcanoes"],
          "movies": ["film noir", "animated films", "sci-fi classics", "documentaries", "film scores"],
          "music": ["jazz records", "vinyl players", "guitar pedals", "live concerts", "choirs"],
          "running": ["marathon training", "trail shoes", "interval runs", "race nutrition", "5k plans"],
          "gardening": ["tomato plants", "composting", "raised beds", "succulents", "pruning roses"],
          "personalfinance": ["index funds", "emergency savings", "credit scores", "budget apps",
                              "taxes"],
          "travel": ["rail passes", "packing light", "hostels", "road trips", "travel insurance"],
          "technology": ["mechanical keyboards", "home servers", "password managers", "e-readers",
                         "linux"]}
COMMENT_BODIES = ["Great point, thanks for sharing.", "I disagree with this.", "Has anyone tried this?",
                  "This helped me a lot.", "Source?", "Same experience here.",
                  "Interesting, tell us more.", "I would add a few things to this.",
                  "Thanks, bookmarked.", "Not sure this is right."]
HANDLE_PARTS = ["river", "pixel", "maple", "quantum", "coffee", "nova", "echo", "lucky", "brave", "ember"]
PROJECT_WORDS = ["atlas", "beacon", "cascade", "drift", "ember", "flux", "granite", "harbor", "iris",
                 "juniper", "keystone", "lumen", "mosaic", "nimbus", "orbit", "prism", "quartz", "relay",
                 "summit", "tundra"]
PROJECT_KINDS = ["cli", "api", "ui", "docs", "sdk", "bot"]
LABELS = ["bug", "feature", "docs", "question", "performance", "security"]
ISSUE_VERBS = ["Fix", "Add", "Improve", "Remove", "Document", "Refactor", "Support", "Update"]
ISSUE_OBJECTS = ["login timeout", "dark mode", "CSV export", "config parser", "retry logic",
                 "README badges", "unicode paths", "memory leak", "rate limiting", "error messages",
                 "test coverage", "release script", "search index", "cache eviction", "logging format",
                 "API pagination"]
ROLES = ["Guest", "Reporter", "Developer", "Maintainer", "Owner"]
PLACE_KINDS = {"cafe": ["Cafe", "Coffee House", "Espresso Bar"],
               "museum": ["Museum", "Gallery"],
               "park": ["Park", "Gardens"],
               "library": ["Library"],
               "restaurant": ["Bistro", "Diner", "Kitchen"],
               "hospital": ["Hospital", "Medical Center"],
               "university": ["University", "College"],
               "station": ["Station"],
               "hotel": ["Hotel", "Inn"],
               "pharmacy": ["Pharmacy"]}
PLACE_NAMES = ["Carnegie", "Schenley", "Frick", "Oakland", "Shadyside", "Bloomfield", "Lawrence",
               "Millvale", "Highland", "Mellon", "Phipps", "Allegheny", "Monongahela", "Duquesne",
               "Point", "Strip", "Southside", "Squirrel Hill", "Polish Hill", "Troy Hill", "Greenfield",
               "Hazelwood"]
MAP_CITIES = [("Pittsburgh", 40.4406, -79.9959), ("Oakmont", 40.5217, -79.842),
              ("Bethel Park", 40.3276, -80.0395)]
# fmt: on
